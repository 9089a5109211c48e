"""The project model: facts from the other files of the project a file belongs to.

One cheap pass over the project (CPython's `ast`, cached by content hash) collects every
file's facts (analysis/facts.py) and the imports between the project's own modules. A rule
then asks about the files around the one it lints, through a `ProjectView`: plain, picklable
data holding exactly the facts that file may use. The view's fingerprint is part of the file's
cache key, so a cached result is invalidated when a fact it used changes, and only then.

Which files are "around" a file depends on the question:
- its callers (every project module that imports it, transitively) decide the device it runs
  on and whether a GradScaler drives its optimizers;
- mixed-precision evidence counts from the file, its callers, and the modules they import
  directly (FSDP policies in `policies.py`, a model that casts itself in `model.py`);
- the dataset classes and optimizer registries it imports by name are looked up where they
  are defined.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Optional

from gpulint.analysis.facts import ClassFacts, FileFacts, ImportRef

ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
_MODULE_EXTENSIONS = (".py", ".pyi")


def find_root(path: Path, fallback: Optional[Path] = None) -> Path:
    """The nearest directory at or above `path` holding a project marker, else `fallback` or the file's folder."""
    start = Path(os.path.abspath(path))
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if any(os.path.exists(os.path.join(candidate, marker)) for marker in ROOT_MARKERS):
            return candidate
    if fallback is not None:
        return Path(os.path.abspath(fallback))
    return directory


@dataclass(frozen=True)
class ProjectView:
    """What the project says about one file; the facts its rules may use, and nothing else.

    `own` are the file's own facts: the linter recomputes them from the text it lints (a fix
    round changes the text), the rest comes from the other files of the project.
    """

    own: FileFacts
    gpu_callers: bool = False  # a module that imports this one shows GPU evidence
    scaler_callers: bool = False  # a module that imports this one creates a GradScaler
    # 16-bit training evidence in other files around this one: (kind, relative path)
    mixed_elsewhere: tuple[tuple[str, str], ...] = ()
    # project classes imported by the file, keyed as the file spells the import target
    # ("pkg.data.MyDataset", ".data.MyDataset", "pkg.data" + ".MyDataset" for `import pkg.data`)
    imported_classes: dict[str, ClassFacts] = field(default_factory=dict)
    star_classes: dict[str, ClassFacts] = field(default_factory=dict)  # names a `from x import *` brings
    imported_optimizers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # keyed like imported_classes
    imported_ints: dict[str, dict[str, int]] = field(default_factory=dict)  # dataclass int fields of importees
    trained_by_callers: frozenset[str] = frozenset()  # top-level classes of this file a caller trains
    scanned: bool = False  # built from a project scan; False: the file alone

    @classmethod
    def alone(cls, facts: FileFacts) -> "ProjectView":
        """The view of a file with no project around it (stdin, tests, editors)."""
        return cls(own=facts)

    def with_own(self, facts: FileFacts) -> "ProjectView":
        return replace(self, own=facts)

    def fingerprint(self) -> str:
        data = asdict(self)
        data["trained_by_callers"] = sorted(self.trained_by_callers)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=list).encode()).hexdigest()[:24]

    # -- merged own + project facts -------------------------------------------------------------
    @property
    def gpu(self) -> bool:
        return self.own.gpu or self.gpu_callers

    @property
    def scaler(self) -> bool:
        return self.own.scaler or self.scaler_callers

    @property
    def mixed_precision(self) -> tuple[tuple[str, str], ...]:
        """(kind, where) pairs; where is "" for the file itself."""
        return tuple(sorted({(kind, "") for kind in self.own.mixed_precision} | set(self.mixed_elsewhere)))

    def class_facts(self, spelled: str) -> Optional[ClassFacts]:
        """A class by the name the file uses: its own top-level class, or an imported project class."""
        return self.own.classes.get(spelled) or self.imported_classes.get(spelled) or self.star_classes.get(spelled)

    def optimizer_classes(self, spelled: str) -> tuple[str, ...]:
        return self.own.optimizers.get(spelled) or self.imported_optimizers.get(spelled, ())

    def dataclass_int(self, field_name: str) -> Optional[int]:
        """The default of a dataclass-style int field of that name, when exactly one value is known."""
        values = set(self.own.dataclass_ints.get(field_name, {}).values())
        values |= set(self.imported_ints.get(field_name, {}).values())
        return values.pop() if len(values) == 1 else None

    @property
    def trained(self) -> frozenset[str]:
        return self.trained_by_callers | _trained_here(self.own)


def _trained_here(facts: FileFacts) -> frozenset[str]:
    if not facts.training:
        return frozenset()
    used = set(facts.names)
    return frozenset(name for name in facts.classes if aliases_of(name, facts) & used)


def aliases_of(name: str, facts: FileFacts) -> set[str]:
    """`name` and every top-level name of the file whose definition leads to it (registries, factories)."""
    out = {name}
    changed = True
    while changed:
        changed = False
        for other, refs in facts.refs.items():
            if other not in out and out.intersection(refs):
                out.add(other)
                changed = True
    return out


class Project:
    """Every Python file under one root, with its facts and the imports between them."""

    def __init__(self, root: Path, facts: dict[str, FileFacts]) -> None:
        self.root = root
        self.facts = facts  # relative posix path -> facts
        self._has_src = any(p.startswith("src/") for p in facts)
        self.edges: dict[str, list[tuple[str, ImportRef]]] = {p: self._resolve_all(p) for p in facts}
        self.importers_of: dict[str, set[str]] = {p: set() for p in facts}
        for source, targets in self.edges.items():
            for target, _ in targets:
                self.importers_of[target].add(source)
        self._callers: dict[str, frozenset[str]] = {}

    # -- imports --------------------------------------------------------------------------------
    def _module_file(self, directory: str, dotted: str) -> Optional[str]:
        """`directory/dotted` as a module file or package; `dotted` "" is the package `directory` itself."""
        parts = [directory] if directory else []
        if dotted:
            parts.append(dotted.replace(".", "/"))
        base = "/".join(parts)
        candidates = [base + "/__init__.py"] if not dotted else [base + ".py", base + ".pyi", base + "/__init__.py"]
        for candidate in candidates:
            candidate = candidate.lstrip("/")
            if candidate in self.facts:
                return candidate
        return None

    def _search_dirs(self, importer: str) -> list[str]:
        """sys.path as the importer sees it: its own folder up to the root, then `src/`."""
        parts = importer.split("/")[:-1]
        dirs = ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]
        if self._has_src:
            dirs.append("src")
        return dirs

    def resolve(self, importer: str, ref: ImportRef) -> list[str]:
        """The project files an import binding reaches: the module, and for `from m import x` a submodule x."""
        if ref.level:
            parts = importer.split("/")[:-1]
            up = ref.level - 1
            if up > len(parts):
                return []
            directories = ["/".join(parts[:len(parts) - up])]
        elif ref.module:
            directories = self._search_dirs(importer)
        else:
            return []
        for directory in directories:
            found: list[str] = []
            module = self._module_file(directory, ref.module)
            if module:
                found.append(module)
            if ref.name not in (None, "*"):
                sub = self._module_file(directory, f"{ref.module}.{ref.name}" if ref.module else ref.name)  # type: ignore[arg-type]
                if sub:
                    found.append(sub)
            if found:
                return [f for f in found if f != importer]
        return []

    def _resolve_all(self, path: str) -> list[tuple[str, ImportRef]]:
        out = []
        for ref in self.facts[path].imports:
            for target in self.resolve(path, ref):
                out.append((target, ref))
        return out

    def importees(self, path: str) -> set[str]:
        return {target for target, _ in self.edges.get(path, ())}

    def callers(self, path: str) -> frozenset[str]:
        """Every project file that imports `path`, directly or through others."""
        cached = self._callers.get(path)
        if cached is not None:
            return cached
        seen: set[str] = set()
        queue = deque([path])
        while queue:
            for importer in self.importers_of.get(queue.popleft(), ()):
                if importer not in seen and importer != path:
                    seen.add(importer)
                    queue.append(importer)
        result = frozenset(seen)
        self._callers[path] = result
        return result

    # -- views ----------------------------------------------------------------------------------
    def relative(self, path: Path) -> Optional[str]:
        try:
            relative = Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return None
        return relative if relative in self.facts else None

    def view(self, path: Path) -> Optional[ProjectView]:
        rel = self.relative(path)
        if rel is None:
            return None
        own = self.facts[rel]
        callers = self.callers(rel)
        around = set(callers) | self.importees(rel)
        for caller in callers:
            around |= self.importees(caller)
        around.discard(rel)
        elsewhere = {(kind, other) for other in around for kind in self.facts[other].mixed_precision}
        classes, star, optimizers = self._visible(rel)
        ints: dict[str, dict[str, int]] = {}
        for source in sorted(self._closure(rel, depth=2)):
            for name, by_class in self.facts[source].dataclass_ints.items():
                ints.setdefault(name, {}).update({f"{source}:{k}": v for k, v in by_class.items()})
        return ProjectView(
            own=own, gpu_callers=any(self.facts[c].gpu for c in callers),
            scaler_callers=any(self.facts[c].scaler for c in callers),
            mixed_elsewhere=tuple(sorted(elsewhere)), imported_classes=classes, star_classes=star,
            imported_optimizers=optimizers, imported_ints=ints, trained_by_callers=self._trained(rel),
            scanned=True,
        )

    def _closure(self, path: str, depth: int) -> set[str]:
        seen: set[str] = set()
        frontier = {path}
        for _ in range(depth):
            frontier = {t for p in frontier for t in self.importees(p)} - seen - {path}
            seen |= frontier
        return seen

    def _visible(self, path: str) -> tuple[dict[str, ClassFacts], dict[str, ClassFacts], dict[str, tuple[str, ...]]]:
        classes: dict[str, ClassFacts] = {}
        optimizers: dict[str, tuple[str, ...]] = {}
        star: dict[str, ClassFacts] = {}
        for target, ref in self.edges.get(path, ()):
            module_facts = self.facts[target]
            spelled_module = "." * ref.level + ref.module
            if ref.name == "*":
                for name, facts in self._exported_classes(target, set()).items():
                    star.setdefault(name, facts)
                continue
            if ref.name is None:  # `import pkg.data as d` / `import pkg`: reached as `pkg.data.Class`
                for name, facts in module_facts.classes.items():
                    classes[f"{spelled_module}.{name}"] = facts
                for name, found in module_facts.optimizers.items():
                    optimizers[f"{spelled_module}.{name}"] = found
                continue
            spelled = f"{spelled_module}.{ref.name}" if ref.module else "." * ref.level + ref.name
            exported = self._exported_classes(target, set())
            if ref.name in exported:
                classes[spelled] = exported[ref.name]
            if ref.name in module_facts.optimizers:
                optimizers[spelled] = module_facts.optimizers[ref.name]
        return classes, star, optimizers

    def _exported_classes(self, path: str, seen: set[str]) -> dict[str, ClassFacts]:
        """Classes a module offers by name: its own, and those it imports from other project modules."""
        if path in seen:
            return {}
        seen.add(path)
        facts = self.facts[path]
        out: dict[str, ClassFacts] = {}
        for target, ref in self.edges.get(path, ()):
            if ref.name == "*":
                for name, cls in self._exported_classes(target, seen).items():
                    out.setdefault(name, cls)
            elif ref.name is not None:
                cls = self._exported_classes(target, seen).get(ref.name)
                if cls is not None:
                    out[ref.local] = cls
        out.update(facts.classes)
        return out

    def _trained(self, path: str) -> frozenset[str]:
        """Top-level classes of `path` that a file with a training step names (or names through a registry)."""
        own = self.facts[path]
        if not own.classes:
            return frozenset()
        trainers = [c for c in self.callers(path) if self.facts[c].training]
        used: set[str] = set()
        for trainer in trainers:
            used.update(self.facts[trainer].names)
        return frozenset(name for name in own.classes if aliases_of(name, own) & used)


def scan_files(root: Path, paths: Iterable[Path], facts_for: "FactsSource") -> Project:
    """A project from the given files under `root`; `facts_for` reads (or recalls) each one's facts."""
    facts: dict[str, FileFacts] = {}
    for path in paths:
        try:
            relative = Path(os.path.abspath(path)).relative_to(root).as_posix()
        except ValueError:
            continue
        found = facts_for(path)
        if found is not None:
            facts[relative] = found
    return Project(root, facts)


class FactsSource:
    """Reads a file's facts, from a cache of earlier runs when its bytes are unchanged."""

    def __call__(self, path: Path) -> Optional[FileFacts]:  # pragma: no cover - interface
        raise NotImplementedError
