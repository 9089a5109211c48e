"""Functions that hand out torch's activation checkpointing function (`get_checkpoint_fn()`), for GPU302.

A project may pick its checkpoint function in one place and call what it returns elsewhere
(`checkpoint = get_checkpoint_fn()` ... `checkpoint(block, x)`): those calls run torch's
`checkpoint` without `use_reentrant` as surely as a direct call does, when the function returns
torch's. Read from the function's own code: every `return` (of the function's own body, not of a
nested function) gives a value, or a name of the function every binding of which is a plain
assignment; the alternatives are the values of conditional expressions and the branches of `if`
statements. A value is on the default path when no `if` test (and no conditional expression) has to
hold for it: it is the statement's `else`, or lies under no `if` at all (OpenFold's
`get_checkpoint_fn` returns DeepSpeed's checkpoint only `if deepspeed_is_configured`, else torch's).
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional

CHECKPOINT = "torch.utils.checkpoint.checkpoint"  # (core/torch_api.py reads it: this layer sits below)
# every value the function returns is torch's checkpoint: a call of what it returns may take `use_reentrant`
ONLY_TORCH = "torch"
# torch's checkpoint on the default path, another value where a test holds (DeepSpeed's, which takes no
# `use_reentrant`): a call of what it returns runs torch's by default, but cannot be given the keyword
TORCH_BY_DEFAULT = "default"

Qualify = Callable[[ast.AST], Iterable[str]]


def checkpoint_getter(function: ast.AST, qualify: Qualify) -> Optional[str]:
    """ONLY_TORCH, TORCH_BY_DEFAULT, or None: whether `function` returns torch's `checkpoint` (not
    `checkpoint_sequential`), read as the module docstring says. `qualify` gives the qualified names a
    dotted name may stand for through the file's imports."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns: list[tuple[ast.Return, bool]] = []
    assigned: dict[str, list[tuple[ast.expr, bool]]] = {}
    other_bindings: set[str] = set()
    _collect(function.body, True, returns, assigned, other_bindings)
    parameters = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    if function.args.vararg is not None:
        parameters.add(function.args.vararg.arg)
    if function.args.kwarg is not None:
        parameters.add(function.args.kwarg.arg)
    if not returns:
        return None
    alternatives: list[tuple[ast.expr, bool]] = []
    for statement, default in returns:
        if statement.value is None:
            return None
        for value, value_default in _branches(statement.value, default):
            if isinstance(value, ast.Name) and (value.id in assigned or value.id in other_bindings
                                                or value.id in parameters):
                name = value.id
                if name in other_bindings or name in parameters:
                    return None  # a loop target, a `with` target, a parameter: not read
                bound = [(v, d and value_default) for found, d in assigned[name] for v, d in _branches(found, d)]
                if sum(1 for _, d in assigned[name] if d) > 1:
                    return None  # bound twice on the default path: which one is returned depends on the order
                alternatives.extend(bound)
            else:
                alternatives.append((value, value_default))
    torch = [CHECKPOINT in set(qualify(value)) for value, _ in alternatives]
    if all(torch):
        return ONLY_TORCH
    if any(is_torch and default for is_torch, (_, default) in zip(torch, alternatives)):
        return TORCH_BY_DEFAULT
    return None


def _branches(value: ast.expr, default: bool) -> list[tuple[ast.expr, bool]]:
    """The values a conditional expression may take: its `else` stays on the default path."""
    if isinstance(value, ast.IfExp):
        return [*_branches(value.body, False), *_branches(value.orelse, default)]
    return [(value, default)]


def _collect(statements: list[ast.stmt], default: bool, returns: list[tuple[ast.Return, bool]],
             assigned: dict[str, list[tuple[ast.expr, bool]]], other: set[str]) -> None:
    """The returns and the assignments of plain names in `statements`, each with whether it is on the default
    path; names bound any other way go to `other`. Nested functions and classes are not entered."""
    for statement in statements:
        if isinstance(statement, ast.Return):
            returns.append((statement, default))
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append((statement.value, default))
                else:
                    other.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            if isinstance(statement.target, ast.Name):
                other.add(statement.target.id)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(statement.name)
        elif isinstance(statement, ast.If):
            _collect(statement.body, False, returns, assigned, other)
            _collect(statement.orelse, default, returns, assigned, other)
        elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            if not isinstance(statement, ast.While):
                other.update(n.id for n in ast.walk(statement.target) if isinstance(n, ast.Name))
            _collect(statement.body, False, returns, assigned, other)  # may run no iteration
            _collect(statement.orelse, False, returns, assigned, other)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    other.update(n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name))
            _collect(statement.body, default, returns, assigned, other)
        elif isinstance(statement, ast.Try):
            _collect(statement.body, default, returns, assigned, other)
            for handler in statement.handlers:
                if handler.name:
                    other.add(handler.name)
                _collect(handler.body, False, returns, assigned, other)
            _collect(statement.orelse, default, returns, assigned, other)
            _collect(statement.finalbody, default, returns, assigned, other)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            other.update((a.asname or a.name.split(".")[0]) for a in statement.names)
        else:  # `match` and the rest: what they return or bind is read as off the default path, or not read
            returns.extend((n, False) for n in ast.walk(statement) if isinstance(n, ast.Return))
            other.update(n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
