"""gpulint's modules import one way: no cycle, each package only from the layers below, no private name
taken from another package.

Imports are read with `ast`: top-level, function-level and `TYPE_CHECKING` ones, relative ones, and a
string that names a gpulint module (what `importlib.import_module` is given). The checks are functions of
the import graph, so the tests below also feed them graphs with the violations this project once had, to
show they would fail."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpulint"

# bottom to top; a module may import from its own layer and the ones before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gpulint",),  # the version, and `dataclass` (gpulint/records.py: a class made a dataclass when first used)
    ("gpulint.project",),  # per-file facts from CPython's `ast`, and the view one file has of its project
    ("gpulint.core",),  # the file context, tree walking, pending edits, rewrite helpers, findings, settings
    ("gpulint.analysis",),  # facts rules share: training steps, datasets, model structure
    ("gpulint.rewrites",),  # code transformations several rules' fixes share
    ("gpulint.rules",),  # one module per rule, and the registry
    # the pipeline: linter, runner, cache, suppressions; notebooks linted as one program per notebook
    ("gpulint.engine", "gpulint.notebook", "gpulint.config", "gpulint.selectors"),
    ("gpulint.dispatch",),  # one file's job: a Python file through the engine, a notebook through its package
    ("gpulint.output",),  # output formats, rule docs, diffs, the progress bar
    ("gpulint.server",),  # the language server
    ("gpulint.cli", "gpulint.verify"),  # the commands
    ("gpulint.__main__",),
)


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a gpulint module
    names: tuple[str, ...] = ()  # what a `from` import takes from it
    line: int = 0


@dataclass(frozen=True)
class AttributeUse:
    """`module.name` where `module` is another gpulint module imported by name."""

    user: str
    used: str
    name: str
    line: int = 0


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def package_of(module: str) -> str:
    """The package a module belongs to (a package's __init__ belongs to the package itself)."""
    path = MODULES.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package_of(importer).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def scan(module: str, source: str) -> tuple[list[Import], list[AttributeUse]]:
    """The imports of gpulint modules in `source` (the text of `module`), and its uses of a private
    attribute of a module it imported by name."""
    tree = ast.parse(source)
    imports: list[Import] = []
    for node in ast.walk(tree):  # every import, also inside functions and `if TYPE_CHECKING:`
        if isinstance(node, ast.Import):
            imports += [Import(module, alias.name, (), node.lineno) for alias in node.names if alias.name in MODULES]
        elif isinstance(node, ast.ImportFrom):
            source_module = _absolute(module, node)
            for alias in node.names:
                target = f"{source_module}.{alias.name}"
                if target in MODULES:  # `from gpulint.engine import linter`: the module itself
                    imports.append(Import(module, target, (), node.lineno))
                elif source_module in MODULES:
                    imports.append(Import(module, source_module, (alias.name,), node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES \
                and node.value != module and "." in node.value:
            imports.append(Import(module, node.value, (), node.lineno))  # importlib.import_module("gpulint.x")
    aliases = {}
    for edge in imports:
        if not edge.names:
            aliases[edge.imported.rpartition(".")[2]] = edge.imported
    uses = [AttributeUse(module, aliases[node.value.id], node.attr, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases]
    return imports, uses


SCANNED = {module: scan(module, path.read_text(encoding="utf-8")) for module, path in MODULES.items()}
IMPORTS = [edge for imports, _ in SCANNED.values() for edge in imports]
ATTRIBUTE_USES = [use for _, uses in SCANNED.values() for use in uses]


def layer_of(module: str) -> int:
    best: Optional[tuple[int, int]] = None  # (prefix length, layer): the most specific prefix decides
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    assert best is not None, f"{module} belongs to no layer: add its package to LAYERS"
    return best[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def find_cycle(edges: dict[str, set[str]]) -> Optional[list[str]]:
    """A cycle of the graph as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def import_cycle(imports: Iterable[Import]) -> Optional[list[str]]:
    edges: dict[str, set[str]] = {}
    for edge in imports:
        if edge.imported != edge.importer:
            edges.setdefault(edge.importer, set()).add(edge.imported)
    return find_cycle(edges)


def package_cycle(imports: Iterable[Import]) -> Optional[list[str]]:
    """A cycle between subpackages of gpulint (`gpulint.engine` -> `gpulint.notebook` -> ...): modules
    of one layer may import each other, but two packages must not lean on each other both ways."""
    edges: dict[str, set[str]] = {}
    for edge in imports:
        importer, imported = _subpackage(edge.importer), _subpackage(edge.imported)
        if importer != imported and importer != "gpulint" and imported != "gpulint":
            edges.setdefault(importer, set()).add(imported)
    return find_cycle(edges)


def _subpackage(module: str) -> str:
    return ".".join(module.split(".")[:2])


def upward_imports(imports: Iterable[Import]) -> list[str]:
    """Imports from a layer above the importer's."""
    return [f"{e.importer} (layer {layer_of(e.importer)}) line {e.line}: {e.imported} (layer {layer_of(e.imported)})"
            for e in imports if layer_of(e.imported) > layer_of(e.importer)]


def private_crossings(imports: Iterable[Import], uses: Iterable[AttributeUse]) -> list[str]:
    """Private names, private modules and private attributes taken from another package."""
    imports = list(imports)
    found = [f"{e.importer}:{e.line} takes {name} from {e.imported}" for e in imports for name in e.names
             if _private(name) and package_of(e.imported) != package_of(e.importer)]
    found += [f"{e.importer}:{e.line} imports the private module {e.imported}" for e in imports
              if any(_private(part) for part in e.imported.split("."))
              and package_of(e.imported) != package_of(e.importer)]
    found += [f"{u.user}:{u.line} uses {u.used}.{u.name}" for u in uses
              if _private(u.name) and package_of(u.used) != package_of(u.user)]
    return found


# -- the scan sees what it must ---------------------------------------------------------------------------------


def test_the_scan_sees_the_imports_it_must() -> None:
    """The checks below are only as good as the scan: it finds top-level, function-level and
    TYPE_CHECKING imports, relative ones, modules imported by name from their package, and modules
    named in a string for importlib."""
    assert len(MODULES) > 60 and len(IMPORTS) > 300
    pairs = {(e.importer, e.imported) for e in IMPORTS}
    assert ("gpulint.engine.libcst_pass", "gpulint.core.context") in pairs
    assert ("gpulint.engine.linter", "gpulint.engine.libcst_pass") in pairs  # inside lint_text
    assert ("gpulint.cli", "gpulint.verify.session") in pairs  # inside the `verify` command's function
    assert ("gpulint.engine.runner", "gpulint.engine.linter") in pairs  # `from gpulint.engine import linter`
    assert ("gpulint.output", "gpulint.output.sarif") in pairs  # FORMATS names it; importlib imports it
    assert ("gpulint.cli", "gpulint.server.start") in pairs  # inside the `server` command's function
    assert ("gpulint.dispatch.jobs", "gpulint.notebook.job") in pairs  # inside the notebook branch


def test_the_scan_reads_every_way_of_importing() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "from ..core import context\n"  # relative, a module
        "from .linter import InternalError\n"  # relative, a name
        "if TYPE_CHECKING:\n"
        "    from gpulint.rules.base import Rule\n"
        "def later():\n"
        "    import gpulint.output.sarif\n"
        "    from gpulint.engine import files\n"
        "    files._glob_to_regex('*')\n"
        "    return importlib.import_module('gpulint.verify.report')\n"
    )
    imports, uses = scan("gpulint.engine.runner", source)
    assert {(e.imported, e.names) for e in imports} == {
        ("gpulint.core.context", ()), ("gpulint.engine.linter", ("InternalError",)),
        ("gpulint.rules.base", ("Rule",)), ("gpulint.output.sarif", ()), ("gpulint.engine.files", ()),
        ("gpulint.verify.report", ()),
    }
    assert uses == [AttributeUse("gpulint.engine.runner", "gpulint.engine.files", "_glob_to_regex", 10)]


# -- the project's graph ----------------------------------------------------------------------------------------


def test_there_is_no_import_cycle() -> None:
    cycle = import_cycle(IMPORTS)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_two_packages_import_each_other() -> None:
    cycle = package_cycle(IMPORTS)
    assert cycle is None, "packages import each other: " + " -> ".join(cycle or [])


def test_the_package_cycle_check_finds_the_engine_notebook_loop() -> None:
    """The loop issue 25 removed: the runner dispatched notebooks, and the notebook package lints with the engine."""
    old = [Import("gpulint.engine.runner", "gpulint.notebook.job", (), 159),
           Import("gpulint.notebook.lint", "gpulint.engine.linter", ("lint_text",), 14)]
    assert package_cycle(old) == ["gpulint.engine", "gpulint.notebook", "gpulint.engine"]
    assert package_cycle(old[1:]) is None


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = []
    for module in MODULES:
        try:
            layer_of(module)
        except AssertionError as exc:
            unplaced.append(str(exc))
    assert not unplaced, "\n".join(unplaced)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports_only_from_its_layer_or_below(module: str) -> None:
    upward = upward_imports(SCANNED[module][0])
    assert not upward, "imports from above:\n" + "\n".join(upward)


def test_no_private_name_crosses_a_package_boundary() -> None:
    crossing = private_crossings(IMPORTS, ATTRIBUTE_USES)
    assert not crossing, "\n".join(crossing)


def test_linting_rules_carry_no_import_of_the_layers_above() -> None:
    """The point of the layers: a rule module can be read knowing only core, analysis and rewrites."""
    rules = [m for m in MODULES if m.startswith("gpulint.rules.gpu")]
    assert len(rules) >= 10
    allowed = {layer_of(p) for p in ("gpulint.core", "gpulint.analysis", "gpulint.rewrites", "gpulint.rules",
                                     "gpulint.project", "gpulint")}
    for module in rules:
        assert {layer_of(e.imported) for e in SCANNED[module][0]} <= allowed, module


# -- the checks fail on the violations this project once had ----------------------------------------------------


def test_the_cycle_check_finds_the_old_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}}) is None
    old = IMPORTS + [Import("gpulint.verify.report", "gpulint.verify.session", ("ScriptResult",)),
                     Import("gpulint.verify.session", "gpulint.verify.report", ("render",))]
    cycle = import_cycle(old)
    assert cycle is not None and {"gpulint.verify.report", "gpulint.verify.session"} <= set(cycle)


def test_the_layer_check_finds_an_upward_import() -> None:
    # analysis <-> engine.context was the heart of the 15-module cycle
    wrong = [Import("gpulint.core.context", "gpulint.analysis.training", ("training_facts",), 3),
             Import("gpulint.rules.gpu001_missing_autocast", "gpulint.engine.linter", (), 9),
             Import("gpulint.analysis.training", "gpulint.core.context", ("FileContext",), 5)]
    assert upward_imports(wrong) == [
        "gpulint.core.context (layer 2) line 3: gpulint.analysis.training (layer 3)",
        "gpulint.rules.gpu001_missing_autocast (layer 5) line 9: gpulint.engine.linter (layer 6)",
    ]


def test_the_layer_check_refuses_a_module_outside_every_layer() -> None:
    with pytest.raises(AssertionError, match="belongs to no layer"):
        upward_imports([Import("gpulint.core.context", "nowhere.else")])


def test_the_privacy_check_finds_private_names_across_packages() -> None:
    wrong = [Import("gpulint.config", "gpulint.engine.files", ("_glob_to_regex",), 12),
             Import("gpulint.engine.suppressions", "gpulint.rules.gpu900_unused_suppression", ("_OURS",), 4),
             Import("gpulint.cli", "gpulint.engine._hidden", (), 7)]
    uses = [AttributeUse("gpulint.cli.lint", "gpulint.engine.linter", "_Placer", 30)]
    assert private_crossings(wrong, uses) == [
        "gpulint.config:12 takes _glob_to_regex from gpulint.engine.files",
        "gpulint.engine.suppressions:4 takes _OURS from gpulint.rules.gpu900_unused_suppression",
        "gpulint.cli:7 imports the private module gpulint.engine._hidden",
        "gpulint.cli.lint:30 uses gpulint.engine.linter._Placer",
    ]


def test_the_privacy_check_allows_private_names_inside_a_package_and_dunders() -> None:
    fine = [Import("gpulint.engine.runner", "gpulint.engine.linter", ("_Placer",)),
            Import("gpulint.rules", "gpulint.rules.base", ("_helper",)),
            Import("gpulint.cli", "gpulint", ("__version__",))]
    assert private_crossings(fine, [AttributeUse("gpulint.engine.cache", "gpulint.engine.files", "_x")]) == []

