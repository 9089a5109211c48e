"""Code that exists to support an old torch, on LibCST: GPU302 reads it until its port to `ast` (analysis/guards.py).

`try: new API / except (ImportError, AttributeError, TypeError): old API`, and the branches of
`if is_torch_version(...)`, `if hasattr(torch, "amp")`, `X if TORCH_GREATER_EQUAL_2_4 else Y`,
`version.parse(torch.__version__) >= ...` keep a project working on the torch versions it
supports. Rewriting the old call there breaks exactly the versions that branch was written
for, so the rules about deprecated or version-dependent API (GPU003, GPU302) stay silent inside.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

import libcst as cst

from gpulint.analysis.training import TrainingFacts
from gpulint.core.names import NameUses
from gpulint.core.values import single_value
from gpulint.core.walk import walk

# exceptions an older torch raises for an API it does not have yet
_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "NameError"})
# a condition about the installed torch: it names torch and a version test or an attribute probe
# (`is_torch_version(">=", "2.4")`, `_TORCH_GREATER_EQUAL_2_4`, `hasattr(torch, "amp")`,
# `version.parse(torch.__version__)`), not merely `torch.cuda.is_available()`
_TORCH = re.compile(r"torch", re.IGNORECASE)
_VERSION_TEST = re.compile(r"version|hasattr|greater|less|_\d+_\d+|\d+\.\d+", re.IGNORECASE)


def version_guarded(facts: TrainingFacts, node: cst.CSTNode) -> bool:
    """`node` sits in a branch that only some torch versions take."""
    child: cst.CSTNode = node
    for ancestor in facts.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test:
            if _is_version_test(facts, ancestor.test):
                return True
        elif isinstance(ancestor, cst.Try) and _catches_fallback(facts, ancestor.handlers):
            return True
        elif isinstance(ancestor, cst.IndentedBlock) and _after_early_exit(facts, ancestor, child):
            return True
        elif isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child = ancestor
    return False


def _after_early_exit(facts: TrainingFacts, block: cst.IndentedBlock, child: cst.CSTNode) -> bool:
    """`if TORCH_2: return new(...)` earlier in the block: the statements after it are the old torch's branch."""
    for statement in block.body:
        if statement is child:
            return False
        if isinstance(statement, cst.If) and statement.orelse is None and _exits(statement.body) \
                and _is_version_test(facts, statement.test):
            return True
    return False


def _exits(body: cst.BaseSuite) -> bool:
    """The suite ends with `return` or `raise`."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    if isinstance(last, cst.SimpleStatementSuite):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False


def _is_version_test(facts: TrainingFacts, test: cst.BaseExpression) -> bool:
    code = facts.ctx.code(test)
    return bool(_TORCH.search(code) and _VERSION_TEST.search(code)) or _reads_version_flag(facts, test)


def _reads_version_flag(facts: TrainingFacts, test: cst.BaseExpression) -> bool:
    """The test reads a name computed once from torch's version: a module-level flag of this file or one
    imported from another (project facts), or a local assigned from `torch.__version__`."""
    flags = facts.ctx.project.version_flags
    for name in NameUses.of(test).loaded:
        if name.value in flags:
            return True
        value = single_value(name, facts.ctx.names)
        if value is not None and value is not name and "__version__" in facts.ctx.code(value):
            return True
    for attribute in _attributes(test):  # `self.torch_2`, `utils.TORCH_GE_2`
        if attribute.attr.value in flags or "torch_version" in attribute.attr.value.lower():
            return True
    return False


def _attributes(expr: cst.BaseExpression) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            found.append(node)

    walk(expr, _Find())
    return found


def _catches_fallback(facts: TrainingFacts, handlers: Iterable[cst.ExceptHandler]) -> bool:
    for handler in handlers:
        if handler.type is None:
            return True  # a bare `except:` around an API call: a fallback of some kind
        if _names(handler.type) & _FALLBACK_ERRORS:
            return True
    return False


def _names(expr: Optional[cst.BaseExpression]) -> set[str]:
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, cst.Attribute):
        return {expr.attr.value}
    if isinstance(expr, cst.Tuple):
        return {name for element in expr.elements for name in _names(element.value)}
    return set()
