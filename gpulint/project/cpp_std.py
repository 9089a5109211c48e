"""A torch ceiling from a native extension pinned to C++14, and code ceilings carried through the imports.

torch 2.1 compiles its headers as C++17 (`torch.utils.cpp_extension` passes `-std=c++17` from 2.1 on, and
c10's headers stop with "C++17 or later compatible compiler is required to use PyTorch"; a change marked
backwards-incompatible in the 2.1 release notes, pytorch/pytorch#100557): an extension
built with `-std=c++14` (or older) after torch's own flags, as ashawkey/torch-ngp's raymarching and
gridencoder backends build theirs (`load(..., extra_cflags=['-O3', '-std=c++14'])`, and the same flags
in their setup.py's `CUDAExtension(extra_compile_args=...)`), compiles only against torch 2.0 or older.
The code that imports the built ops runs on no newer torch: its first torch it cannot run on, its
ceiling, is 2.1 (CPP14_CEILING), as for the other ceilings of project/facts.py (`torch_ceiling`).

Read here, per file (project/facts.py keeps the results):
- `pins_pre_cpp17`: a `load`/`load_inline` call, or a `CUDAExtension`/`CppExtension`, whose compile flags
  (`extra_cflags`, `extra_cuda_cflags`, `extra_compile_args`, literally or through names the file binds)
  name a standard before C++17 in the GCC/nvcc spelling (`-std=c++14`), and none from C++17 on;
- `import_alternatives` and `conditional_imports`: which module-level imports run unconditionally
  (the `__main__` block counts as the script's body) and which are alternatives of one another (the
  branches of a `try`/`except ImportError`, of an `if`/`elif`/`else`).

Then `propagate` gives every module of a project the lowest ceiling its code runs under: its own, that of
a module it imports unconditionally (directly or through others), that of a group of alternatives every
branch of which imports capped code (`try: import _raymarching` / `except ImportError: from .backend
import _backend`: the installed extension or the one built at import, both C++14), the ceiling of a
compiled extension it imports by name, and for a helper module that runs only under the files importing
it (project/view.py `_runs_under_importers`: defines only, outside any package others install) the highest of its
importers' ceilings. The fixed point is computed once per project with a worklist, so import cycles
converge and each module is visited a bounded number of times.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Iterable, Mapping, Optional, Sequence

from gpulint.project.ast_nodes import all_nodes, walk

Version = tuple[int, int]

# the first torch whose headers need C++17: an extension compiled as C++14 builds only against older ones
CPP14_CEILING: Version = (2, 1)
# `-std=c++14`, `--std=c++11`, `-std=gnu++14`, `-std=c++1y`: a standard before C++17 (GCC, clang and nvcc)
_OLD_STD = re.compile(r"^--?std[= ](?:c|gnu)\+\+(?:98|03|0x|11|1y|14)$")
# a standard from C++17 on in the same spelling: the flags do not pin the old one alone
_NEW_STD = re.compile(r"^--?std[= ](?:c|gnu)\+\+(?:1z|17|2a|20|2b|23|2c|26)$")
_FLAG_KEYWORDS = frozenset({"extra_cflags", "extra_cuda_cflags", "extra_compile_args"})


def pins_pre_cpp17(call: ast.Call, tree: ast.Module) -> bool:
    """The call's compile flags name a C++ standard before C++17 (`-std=c++14`) and none from C++17 on: the
    strings of its flag keywords, of the names they read (every value the file binds, appends or extends
    them with: `c_flags = ['-O3', '-std=c++14']` on POSIX beside `['/O2', '/std:c++17']` for MSVC on
    Windows pins C++14 wherever GCC builds it), and of dicts of them (`{'cxx': ..., 'nvcc': ...}`)."""
    flags: list[str] = []
    for keyword in call.keywords:
        if keyword.arg in _FLAG_KEYWORDS:
            flags.extend(_strings(keyword.value, tree, set()))
    return any(_OLD_STD.match(f) for f in flags) and not any(_NEW_STD.match(f) for f in flags)


def _strings(node: ast.AST, tree: ast.Module, seen: set[str]) -> list[str]:
    """The string constants an expression holds, following names through the file's bindings of them."""
    out: list[str] = []
    for inner in walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            out.append(inner.value.strip())
        elif isinstance(inner, ast.Name) and inner.id not in seen:
            seen.add(inner.id)
            for value in _bound_values(tree, inner.id):
                out.extend(_strings(value, tree, seen))
    return out


def _bound_values(tree: ast.Module, name: str) -> Iterable[ast.AST]:
    """What the file binds `name` to or adds to it: `name = v`, `name += v`, `name.append(v)`, `.extend(v)`."""
    for node in all_nodes(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            yield node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) \
                and node.target.id == name and node.value is not None:
            yield node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("append", "extend") and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == name:
            yield from node.args


# -- which imports run unconditionally ----------------------------------------------------------------------

Refs = Callable[[list[ast.stmt]], tuple]  # the ImportRefs of import statements (project/facts.py `_imports`)


def import_alternatives(body: list[ast.stmt], refs_of: Refs) -> tuple[tuple[tuple, ...], ...]:
    """The groups of module-level imports that are alternatives of one another, each a tuple of branches
    (each the ImportRefs one branch makes at its own level): the body of a `try` (with its `else`) and each
    `except` handler that does not end by raising, or each branch of an `if`/`elif`/`else` chain. A group
    with a branch that imports nothing is left out (that branch runs without the import), and so are
    compound statements nested inside a branch (not read: the branch counts only its own imports)."""
    groups: list[tuple[tuple, ...]] = []
    for node in _script_body(body):
        branches: Optional[list[list[ast.stmt]]] = None
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            handlers = [h for h in node.handlers if not _raises(h.body)]  # type: ignore[attr-defined]
            if node.handlers:  # type: ignore[attr-defined]
                branches = [node.body + node.orelse] + [h.body for h in handlers]  # type: ignore[attr-defined]
        elif isinstance(node, ast.If):
            branches = _if_branches(node)
        if not branches:  # a `try` whose handlers all raise: one branch, always taken
            continue
        found = tuple(refs_of(_own_imports(b)) for b in branches)
        if all(found):
            groups.append(found)
    return tuple(groups)


def conditional_imports(body: list[ast.stmt], refs_of: Refs) -> tuple:
    """The module-level imports made inside a `try`, `if` (other than the `__main__` guard) or other block:
    not unconditional."""
    unconditional = refs_of(_own_imports(list(_script_body(body))))
    everything = refs_of(body)
    return tuple(ref for ref in everything if ref not in set(unconditional))


def _script_body(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The module's statements, with the body of `if __name__ == "__main__":` read as part of them."""
    for node in body:
        if isinstance(node, ast.If) and _main_guard(node.test) and not node.orelse:
            yield from _script_body(node.body)
        else:
            yield node


def _main_guard(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__" \
        and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant) \
        and test.comparators[0].value == "__main__" and isinstance(test.ops[0], ast.Eq)


def _if_branches(node: ast.If) -> Optional[list[list[ast.stmt]]]:
    """The branches of an if/elif/else chain; None without a final `else` (a path imports nothing)."""
    branches = [node.body]
    rest = node.orelse
    while len(rest) == 1 and isinstance(rest[0], ast.If):
        branches.append(rest[0].body)
        rest = rest[0].orelse
    if not rest:
        return None
    branches.append(rest)
    return branches


def _own_imports(body: Iterable[ast.stmt]) -> list[ast.stmt]:
    return [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]


def _raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


# -- the fixed point over the project -----------------------------------------------------------------------

def propagate(paths: Sequence[str], own: Mapping[str, Optional[Version]],
              requires: Mapping[str, Sequence[Sequence[Sequence[str]]]],
              importers: Mapping[str, Sequence[str]], helpers: Iterable[str]) -> dict[str, Version]:
    """The ceiling of each module's code, lowest first, where one is known.

    `own`: a module's own ceiling (None: none); `requires`: for each module, groups of branches of the modules
    (keys of `own`) each branch imports; a group whose every branch imports a capped module caps the module at
    the highest of the branches' ceilings (an unconditional import is a group of one branch of one module);
    `importers`: the modules importing each one; `helpers`: the modules whose code runs only under their
    importers, capped at the highest of those importers' ceilings where every importer has one.

    Ceilings only go down while the worklist runs (from "none"), so it ends, and an import cycle with no
    evidence on it stays uncapped (the greatest fixed point: no ceiling is assumed)."""
    helper_set = set(helpers)
    value: dict[str, Optional[Version]] = {p: own.get(p) for p in paths}
    dependents: dict[str, set[str]] = {p: set() for p in paths}  # who to look at again when p's ceiling drops
    for path in paths:
        for group in requires.get(path, ()):
            for branch in group:
                for target in branch:
                    if target in dependents and target != path:
                        dependents[target].add(path)
        if path in helper_set:
            for importer in importers.get(path, ()):
                if importer in dependents and importer != path:
                    dependents[importer].add(path)
    pending = [p for p in paths if value[p] is not None]
    queued = set(pending)
    while pending:
        path = pending.pop()
        queued.discard(path)
        for dependent in sorted(dependents[path]):
            found = _evaluate(dependent, value, requires, importers, dependent in helper_set)
            if found is not None and (value[dependent] is None or found < value[dependent]):  # type: ignore[operator]
                value[dependent] = found
                if dependent not in queued:
                    queued.add(dependent)
                    pending.append(dependent)
    return {p: v for p, v in value.items() if v is not None}


def _evaluate(path: str, value: Mapping[str, Optional[Version]],
              requires: Mapping[str, Sequence[Sequence[Sequence[str]]]], importers: Mapping[str, Sequence[str]],
              helper: bool) -> Optional[Version]:
    known = [c for c in (value.get(path),) if c is not None]
    for group in requires.get(path, ()):
        branch_ceilings: list[Version] = []
        for branch in group:
            capped = [c for t in branch if t != path and (c := value.get(t)) is not None]
            if not capped:
                break
            branch_ceilings.append(min(capped))
        else:
            if branch_ceilings:
                known.append(max(branch_ceilings))
    if helper:
        above = [value.get(i) for i in importers.get(path, ()) if i != path]
        if above and all(c is not None for c in above):
            known.append(max(c for c in above if c is not None))
    return min(known) if known else None
