"""Findings and fixes as rules describe them: anchored on CST nodes, placed in the text later.

Rules cannot know offsets (positions are computed only for reported nodes, after the
rules ran), so they report nodes and describe edits relative to nodes, and the engine
resolves them into `Finding`s with text edits (core/findings.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Protocol, Sequence, Union

import libcst as cst

from gpulint.core.edits import Applicability
from gpulint.core.names import NameTable

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


# Submodules that `import torch` makes reachable as attributes (checked on torch 2.4-2.14).
_REACHABLE_FROM_TORCH = (
    "torch.amp", "torch.autograd", "torch.cuda", "torch.nn", "torch.optim",
    "torch.utils.data", "torch.utils.checkpoint", "torch.distributed",
)


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
                module.startswith(target + ".") and target == "torch" and module.startswith(_REACHABLE_FROM_TORCH)
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
        anchor, after = self._anchor()
        return InsertStatements(anchor=anchor, code=statement, after=after)

    def _anchor(self) -> tuple[Optional[cst.BaseStatement], bool]:
        """After the last import of the module's opening block, else before its first statement."""
        body = self.module.body
        last_import: Optional[cst.BaseStatement] = None
        preamble: Optional[cst.BaseStatement] = None
        for index, statement in enumerate(body):
            if isinstance(statement, cst.SimpleStatementLine):
                small = statement.body
                if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
                    last_import = statement
                    continue
                if index == 0 and len(small) == 1 and isinstance(small[0], cst.Expr) and isinstance(
                    small[0].value, (cst.SimpleString, cst.ConcatenatedString)
                ):
                    preamble = statement  # module docstring
                    continue
            break
        if last_import is not None:
            return last_import, True
        if preamble is not None:
            return preamble, True
        return (body[0], False) if body else (None, False)
