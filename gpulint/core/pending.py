"""Findings and fixes as rules describe them: anchored on CST nodes, placed in the text later.

Rules cannot know offsets (positions are computed only for reported nodes, after the
rules ran), so they report nodes and describe edits relative to nodes, and the engine
resolves them into `Finding`s with text edits (core/findings.py).
"""

from __future__ import annotations

import sys
from typing import ClassVar, Optional, Protocol, Sequence, Union

import libcst as cst

from gpulint.core.edits import Applicability
from gpulint.core.names import NameTable
from gpulint.core.torch_api import REACHABLE_FROM_TORCH
from gpulint.records import dataclass

Replacement = Union[cst.CSTNode, Sequence[cst.CSTNode], str]


@dataclass(frozen=True)
class Replace:
    """Replace `node`'s code with `new` (a node, several statements, or text)."""

    node: cst.CSTNode
    new: Replacement


@dataclass(frozen=True)
class InsertStatements:
    """Insert statement code before or after the statement `anchor`, at its indentation.

    `code` is unindented and may span several lines; with anchor None it goes at the
    top of the module (after the docstring and `__future__` imports).
    """

    anchor: Optional[cst.BaseStatement]
    code: str
    after: bool = False


PendingEdit = Union[Replace, InsertStatements]


@dataclass(frozen=True)
class PendingFix:
    applicability: Applicability
    message: str
    edits: tuple[PendingEdit, ...]

    @classmethod
    def safe(cls, message: str, *edits: Optional[PendingEdit]) -> "PendingFix":
        return cls(Applicability.SAFE, message, tuple(e for e in edits if e is not None))

    @classmethod
    def unsafe(cls, message: str, *edits: Optional[PendingEdit]) -> "PendingFix":
        return cls(Applicability.UNSAFE, message, tuple(e for e in edits if e is not None))


class Reporter(Protocol):
    """What a finding needs to know of the rule that reported it."""

    code: ClassVar[str]
    name: ClassVar[str]


@dataclass
class PendingFinding:
    """What a rule reported on a node; the engine places it (row, column, edits) after the walk."""

    rule: Reporter
    node: cst.CSTNode
    message: str
    fix: Optional[PendingFix]
    statement: Optional[cst.CSTNode]  # the statement whose lines a suppression comment may sit on
    note: str = ""  # what the message leaves out (core/findings.py)




@dataclass(frozen=True)
class Reference:
    """How to spell a torch object in this file, and the import edit it needs, if any."""

    expr: str
    edit: Optional[InsertStatements] = None


@dataclass
class ImportPlanner:
    module: cst.Module
    names: NameTable

    def reference(self, module: str, name: str, prefer_from: bool = False) -> Reference:
        """Spell `module.name`, reusing the file's own imports and aliases where it can."""
        qualified = f"{module}.{name}"
        bound = self._bound_names()
        # 1. a name bound to the object itself: `from torch.amp import GradScaler as GS`
        for alias, target in bound.items():
            if target == qualified:
                return Reference(alias)
        # 2. a name bound to the module or a parent module: `import torch.amp as amp`, `import torch`
        best: Optional[tuple[str, str]] = None
        for alias, target in bound.items():
            if target is None:
                continue
            if module == target or (
                module.startswith(target + ".") and target == "torch" and module.startswith(REACHABLE_FROM_TORCH)
            ):
                if best is None or len(target) > len(best[1]):
                    best = (alias, target)
        if best is not None and not (prefer_from and best[1] != module):
            alias, target = best
            return Reference(alias + module[len(target):] + "." + name)
        # 3. add an import, unless the name it would bind is taken
        all_names = self._all_bound_names()
        if prefer_from and name not in all_names:
            return Reference(name, self._insert(f"from {module} import {name}"))
        if best is not None:
            alias, target = best
            return Reference(alias + module[len(target):] + "." + name)
        if module.split(".")[0] not in all_names:
            return Reference(f"{module}.{name}", self._insert(f"import {module}"))
        alias = name
        while alias in all_names:
            alias = f"{module.split('.')[-1]}_{alias}"
        statement = f"from {module} import {name}" + (f" as {alias}" if alias != name else "")
        return Reference(alias, self._insert(statement))

    def module_alias(self, module: str = "torch") -> Reference:
        """The name under which the file imports `module` (adding `import module` if none)."""
        for alias, target in self._bound_names().items():
            if target == module:
                return Reference(alias)
        all_names = self._all_bound_names()
        if module.split(".")[0] not in all_names:
            return Reference(module, self._insert(f"import {module}"))
        alias = module.replace(".", "_") + "_"
        while alias in all_names:
            alias += "_"
        return Reference(alias, self._insert(f"import {module} as {alias}"))

    # -- helpers ------------------------------------------------------------
    def _bound_names(self) -> dict[str, Optional[str]]:
        out: dict[str, Optional[str]] = {}
        for alias, targets in self.names.module_scope.bindings.items():
            unique = set(targets)
            out[alias] = targets[0] if len(unique) == 1 and None not in unique else None
        return out

    def _all_bound_names(self) -> set[str]:
        names: set[str] = set()
        for scope in self.names.scopes.values():
            names.update(scope.bindings)
        return names

    def _insert(self, statement: str) -> InsertStatements:
        """Where `statement` (one import) goes: into its isort section of the module's opening import
        block, in the order ruff's and isort's defaults keep (plain imports before `from` imports,
        modules compared case-insensitively), or as a new section with blank lines around it."""
        block = self._import_block()
        key = _import_key(statement)
        if not block:
            anchor, after = self._anchor()
            if anchor is not None and not after:  # before the first statement: blank lines after it (PEP 8)
                blank = "\n\n\n" if isinstance(anchor, (cst.FunctionDef, cst.ClassDef)) else "\n\n"
                return InsertStatements(anchor=anchor, code=statement + blank, after=False)
            return InsertStatements(anchor=anchor, code=statement, after=after)
        groups: list[list[tuple[cst.SimpleStatementLine, tuple[int, int, str]]]] = []
        for line in block:
            if not groups or any(empty.comment is None for empty in line.leading_lines):
                groups.append([])
            groups[-1].append((line, _import_key(self.module.code_for_node(line.body[0]).strip())))
        sections = [min(k[0] for _, k in group) for group in groups]
        members = [(line, other) for group in groups for line, other in group]
        root = key[2].split(".")[0]
        # in order among the imports of the same package (`torch`), else of its section; blank lines
        # aside (a notebook's cells have them), and never among a project's own modules it cannot tell
        same = [m for m in members if m[1][0] == key[0] and m[1][2].split(".")[0] == root] or [
            m for m in members if m[1][0] == key[0]]
        if same:
            for line, other in same:
                if other > key:
                    return InsertStatements(anchor=line, code=statement, after=False)
            return InsertStatements(anchor=same[-1][0], code=statement, after=True)
        # no section of its kind yet: a new one between the sections before and after it
        before = [group for group, section in zip(groups, sections) if section < key[0]]
        if before:
            return InsertStatements(anchor=before[-1][-1][0], code="\n" + statement, after=True)
        return InsertStatements(anchor=groups[0][0][0], code=statement + "\n\n", after=False)

    def _import_block(self) -> list[cst.SimpleStatementLine]:
        """The module's opening import statements (after its docstring), one import a line."""
        found: list[cst.SimpleStatementLine] = []
        for index, statement in enumerate(self.module.body):
            if isinstance(statement, cst.SimpleStatementLine):
                small = statement.body
                if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
                    found.append(statement)
                    continue
                if index == 0 and _is_docstring(statement):
                    continue
            break
        return found

    def _anchor(self) -> tuple[Optional[cst.BaseStatement], bool]:
        """After the module docstring, else before its first statement (a module without imports)."""
        body = self.module.body
        first = body[0] if body else None
        if first is not None and _is_docstring(first):
            return first, True
        return (first, False) if first is not None else (None, False)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(
        statement.body[0], cst.Expr) and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


_FUTURE, _STDLIB, _THIRD_PARTY, _LOCAL = 0, 1, 2, 3


def _section(module: str) -> int:
    """isort's section of a module: `__future__`, the standard library, third party, or local
    (relative). Modules of the project itself cannot be told from third-party ones by name: they
    share the third-party rank, which keeps an insertion next to the file's other package imports."""
    if module.startswith("."):
        return _LOCAL
    root = module.split(".")[0]
    if root == "__future__":
        return _FUTURE
    return _STDLIB if root in _STDLIB_NAMES else _THIRD_PARTY


def _import_key(code: str) -> tuple[int, int, str]:
    """(section, plain import before `from` import, module lowercased): the order ruff's isort keeps."""
    words = code.split()
    if words and words[0] == "from" and len(words) > 1:
        return _section(words[1]), 1, words[1].lower()
    module = words[1].rstrip(",") if len(words) > 1 else ""
    return _section(module), 0, module.lower()


def _stdlib_names() -> frozenset[str]:
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return frozenset(names)
    return frozenset({  # Python 3.9: the modules a fix may import, and the common ones around them
        "os", "sys", "re", "math", "time", "json", "random", "argparse", "logging", "functools", "itertools",
        "collections", "dataclasses", "typing", "pathlib", "shutil", "subprocess", "copy", "glob", "pickle",
        "warnings", "contextlib", "datetime", "abc", "io", "inspect", "string", "tempfile", "threading", "uuid",
    })


_STDLIB_NAMES = _stdlib_names()
