"""gpulint's modules import one way: no cycle, each package only from the layers below, no private name
taken from another package. Imports are read with `ast`, function-level and `TYPE_CHECKING` ones included."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpulint"

# bottom to top; a module may import from its own layer and the ones before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gpulint",),  # the version
    ("gpulint.project",),  # per-file facts from CPython's `ast`, and the view one file has of its project
    ("gpulint.core",),  # the file context, tree walking, pending edits, rewrite helpers, findings, settings
    ("gpulint.analysis",),  # facts rules share: training steps, datasets, model structure
    ("gpulint.rewrites",),  # code transformations several rules' fixes share
    ("gpulint.rules",),  # one module per rule, and the registry
    ("gpulint.engine", "gpulint.config", "gpulint.selectors"),  # the pipeline: linter, runner, cache, suppressions
    ("gpulint.output",),  # output formats and rule docs
    ("gpulint.cli", "gpulint.verify"),  # the commands
    ("gpulint.__main__",),
)


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a gpulint module
    names: tuple[str, ...]  # what a `from` import takes from it
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def package_of(module: str) -> str:
    """The package a module belongs to (a package's __init__ belongs to the package itself)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package_of(importer).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> Iterator[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # every import, also inside functions and `if TYPE_CHECKING:`
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield Import(module, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if target in MODULES:  # `from gpulint.engine import linter`: the module itself
                    yield Import(module, target, (), node.lineno)
                elif source in MODULES:
                    yield Import(module, source, (alias.name,), node.lineno)


IMPORTS = [edge for module in MODULES for edge in imports_of(module)]


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


def test_the_scan_sees_the_imports_it_must() -> None:
    """The checks below are only as good as the scan: it finds top-level, function-level and
    TYPE_CHECKING imports, relative ones, and modules imported by name from their package."""
    assert len(MODULES) > 60 and len(IMPORTS) > 300
    pairs = {(e.importer, e.imported) for e in IMPORTS}
    assert ("gpulint.engine.linter", "gpulint.core.context") in pairs
    assert ("gpulint.cli", "gpulint.verify.session") in pairs  # inside the `verify` command's function
    assert ("gpulint.engine.runner", "gpulint.engine.linter") in pairs  # `from gpulint.engine import linter`


def test_there_is_no_import_cycle() -> None:
    edges: dict[str, set[str]] = {}
    for edge in IMPORTS:
        if edge.imported != edge.importer:
            edges.setdefault(edge.importer, set()).add(edge.imported)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}}) is None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports_only_from_its_layer_or_below(module: str) -> None:
    upward = [f"line {e.line}: {e.imported} (layer {layer_of(e.imported)})" for e in IMPORTS
              if e.importer == module and layer_of(e.imported) > layer_of(module)]
    assert not upward, f"{module} (layer {layer_of(module)}) imports from above: " + "; ".join(upward)


def test_no_private_name_crosses_a_package_boundary() -> None:
    crossing = [f"{e.importer}:{e.line} takes {name} from {e.imported}" for e in IMPORTS for name in e.names
                if _private(name) and package_of(e.imported) != package_of(e.importer)]
    crossing += [f"{e.importer}:{e.line} imports the private module {e.imported}" for e in IMPORTS
                 if _private(e.imported.rpartition(".")[2]) and package_of(e.imported) != package_of(e.importer)]
    crossing += _private_attributes()
    assert not crossing, "\n".join(crossing)


def _private_attributes() -> list[str]:
    """`linter._Placer` through a module imported from another package counts as crossing too."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for edge in imports_of(module):
            if not edge.names:
                aliases[edge.imported.rpartition(".")[2]] = edge.imported
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                target = aliases.get(node.value.id)
                if target is not None and package_of(target) != package_of(module):
                    found.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def test_linting_rules_carry_no_import_of_the_layers_above() -> None:
    """The point of the layers: a rule module can be read knowing only core, analysis and rewrites."""
    rules = [m for m in MODULES if m.startswith("gpulint.rules.gpu")]
    assert rules
    for module in rules:
        assert all(layer_of(e.imported) <= layer_of(module) for e in imports_of(module))
