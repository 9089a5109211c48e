"""Code that exists to support an old torch: a deprecated call there is deliberate.

`try: new API / except (ImportError, AttributeError, TypeError): old API`, and the branches of
`if is_torch_version(...)`, `if hasattr(torch, "amp")`, `X if TORCH_GREATER_EQUAL_2_4 else Y`,
`version.parse(torch.__version__) >= ...` keep a project working on the torch versions it
supports. Rewriting the old call there breaks exactly the versions that branch was written
for, so the rules about deprecated or version-dependent API (GPU003, GPU302) stay silent inside.

Read on CPython's `ast` (issue 25): no LibCST here.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Optional

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.ast_values import single_value
from gpulint.project.ast_nodes import walk as walk_nodes

# exceptions an older torch raises for an API it does not have yet
_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "NameError"})
# a condition about the installed torch: it names torch and a version test or an attribute probe
# (`is_torch_version(">=", "2.4")`, `_TORCH_GREATER_EQUAL_2_4`, `hasattr(torch, "amp")`,
# `version.parse(torch.__version__)`), not merely `torch.cuda.is_available()`
_TORCH = re.compile(r"torch", re.IGNORECASE)
_VERSION_TEST = re.compile(r"version|hasattr|greater|less|_\d+_\d+|\d+\.\d+", re.IGNORECASE)
# the statement lists of a block statement (the module's own body is not a block: nothing exits it early)
_BLOCKS = ("body", "orelse", "finalbody")


def version_guarded(ctx: AstContext, node: ast.AST) -> bool:
    """`node` sits in a branch that only some torch versions take."""
    child: ast.AST = node
    for ancestor in ctx.ancestors(node):
        if isinstance(child, ast.stmt) and not isinstance(ancestor, ast.Module) \
                and _after_early_exit(ctx, ancestor, child):
            return True
        if isinstance(ancestor, (ast.If, ast.IfExp)) and child is not ancestor.test:
            if _is_version_test(ctx, ancestor.test):
                return True
        elif isinstance(ancestor, ast.Try) and _catches_fallback(ancestor.handlers):
            return True
        elif isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        child = ancestor
    return False


def _after_early_exit(ctx: AstContext, owner: ast.AST, child: ast.stmt) -> bool:
    """`if TORCH_2: return new(...)` earlier in the block: the statements after it are the old torch's branch."""
    block = next((b for b in (getattr(owner, name, None) for name in _BLOCKS)
                  if isinstance(b, list) and any(s is child for s in b)), None)
    if block is None:
        return False
    for statement in block:
        if statement is child:
            return False
        if isinstance(statement, ast.If) and not statement.orelse and _exits(statement.body) \
                and _is_version_test(ctx, statement.test):
            return True
    return False


def _exits(body: list[ast.stmt]) -> bool:
    """The block ends with `return` or `raise`."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def _is_version_test(ctx: AstContext, test: ast.expr) -> bool:
    code = ctx.segment(test)
    return bool(_TORCH.search(code) and _VERSION_TEST.search(code)) or _reads_version_flag(ctx, test)


def _loaded_names(test: ast.expr) -> list[ast.Name]:
    """The names a condition reads (a walrus target is written, not read)."""
    written = {id(n.target) for n in walk_nodes(test) if isinstance(n, ast.NamedExpr)}
    return [n for n in walk_nodes(test) if isinstance(n, ast.Name) and id(n) not in written]


def _reads_version_flag(ctx: AstContext, test: ast.expr) -> bool:
    """The test reads a name computed once from torch's version: a module-level flag of this file or one
    imported from another (project facts), or a local assigned from `torch.__version__`."""
    flags = ctx.project.version_flags
    for name in _loaded_names(test):
        if name.id in flags:
            return True
        value = single_value(name, ctx.names)
        if value is not None and value is not name and "__version__" in ctx.segment(value):
            return True
    for attribute in (n for n in walk_nodes(test) if isinstance(n, ast.Attribute)):  # `self.torch_2`
        if attribute.attr in flags or "torch_version" in attribute.attr.lower():
            return True
    return False


def _catches_fallback(handlers: Iterable[ast.ExceptHandler]) -> bool:
    for handler in handlers:
        if handler.type is None:
            return True  # a bare `except:` around an API call: a fallback of some kind
        if _names(handler.type) & _FALLBACK_ERRORS:
            return True
    return False


def _names(expr: Optional[ast.expr]) -> set[str]:
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.Attribute):
        return {expr.attr}
    if isinstance(expr, ast.Tuple):
        return {name for element in expr.elts for name in _names(element)}
    return set()
