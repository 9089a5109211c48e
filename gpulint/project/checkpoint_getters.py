"""Functions that hand out torch's activation checkpointing function (`get_checkpoint_fn()`), for GPU302.

A project may pick its checkpoint function in one place and call what it returns elsewhere
(`checkpoint = get_checkpoint_fn()` ... `checkpoint(block, x)`): those calls run torch's
`checkpoint` without `use_reentrant` as surely as a direct call does, when the function returns
torch's and nothing else. Read from the function's own code: every `return` (of the function's own
body, not of a nested function) gives a value, or a name of the function every binding of which is a
plain assignment; the alternatives are the values of conditional expressions and of every such
binding. A function with any other alternative gives nothing, even where torch's is on its default
path (OpenFold's `get_checkpoint_fn` returns DeepSpeed's checkpoint `if deepspeed_is_configured`, else
torch's): which one a call runs is then a matter of configuration the linter does not see, and a call
that may run DeepSpeed's cannot be given `use_reentrant` (it takes none), so there is nothing to fix.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional

CHECKPOINT = "torch.utils.checkpoint.checkpoint"  # (core/torch_api.py reads it: this layer sits below)
# every value the function returns is torch's checkpoint: a call of what it returns may take `use_reentrant`
ONLY_TORCH = "torch"

Qualify = Callable[[ast.AST], Iterable[str]]


def checkpoint_getter(function: ast.AST, qualify: Qualify) -> Optional[str]:
    """ONLY_TORCH or None: whether every value `function` returns is torch's `checkpoint` (not
    `checkpoint_sequential`), read as the module docstring says; a function that may return another value
    (DeepSpeed's checkpoint where a test holds) gives None. `qualify` gives the qualified names a dotted name
    may stand for through the file's imports."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns: list[ast.Return] = []
    assigned: dict[str, list[ast.expr]] = {}
    other_bindings: set[str] = set()
    _collect(function.body, returns, assigned, other_bindings)
    parameters = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    if function.args.vararg is not None:
        parameters.add(function.args.vararg.arg)
    if function.args.kwarg is not None:
        parameters.add(function.args.kwarg.arg)
    if not returns:
        return None
    alternatives: list[ast.expr] = []
    for statement in returns:
        if statement.value is None:
            return None
        for value in branches(statement.value):
            if isinstance(value, ast.Name) and (value.id in assigned or value.id in other_bindings
                                                or value.id in parameters):
                if value.id in other_bindings or value.id in parameters:
                    return None  # a loop target, a `with` target, a parameter: not read
                alternatives.extend(v for found in assigned[value.id] for v in branches(found))
            else:
                alternatives.append(value)
    if all(CHECKPOINT in set(qualify(value)) for value in alternatives):
        return ONLY_TORCH
    return None


def branches(value: ast.expr) -> list[ast.expr]:
    """The values a conditional expression may take."""
    if isinstance(value, ast.IfExp):
        return [*branches(value.body), *branches(value.orelse)]
    return [value]


def _collect(statements: list[ast.stmt], returns: list[ast.Return], assigned: dict[str, list[ast.expr]],
             other: set[str]) -> None:
    """The returns and the assignments of plain names in `statements`; names bound any other way go to
    `other`. Nested functions and classes are not entered."""
    for statement in statements:
        if isinstance(statement, ast.Return):
            returns.append(statement)
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(statement.value)
                else:
                    other.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            if isinstance(statement.target, ast.Name):
                other.add(statement.target.id)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(statement.name)
        elif isinstance(statement, ast.If):
            _collect(statement.body, returns, assigned, other)
            _collect(statement.orelse, returns, assigned, other)
        elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            if not isinstance(statement, ast.While):
                other.update(n.id for n in ast.walk(statement.target) if isinstance(n, ast.Name))
            _collect(statement.body, returns, assigned, other)
            _collect(statement.orelse, returns, assigned, other)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    other.update(n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name))
            _collect(statement.body, returns, assigned, other)
        elif isinstance(statement, ast.Try):
            _collect(statement.body, returns, assigned, other)
            for handler in statement.handlers:
                if handler.name:
                    other.add(handler.name)
                _collect(handler.body, returns, assigned, other)
            _collect(statement.orelse, returns, assigned, other)
            _collect(statement.finalbody, returns, assigned, other)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            other.update((a.asname or a.name.split(".")[0]) for a in statement.names)
        else:  # `match` and the rest: what they return is read, what they bind is not
            returns.extend(n for n in ast.walk(statement) if isinstance(n, ast.Return))
            other.update(n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
