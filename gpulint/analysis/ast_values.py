"""What an expression holds, when the file shows it plainly, on CPython's `ast` (issue 25).

The `ast` counterparts of core/values.py and core/rewrite.py's `is_literal`: a name's one value, the value a
name holds where it is read (straight-line code), and literal tests that match what LibCST saw (a literal
`0` is the text `0`, not `0x0` or `False`).
"""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.ast_context import AstContext, AstNames
from gpulint.project.ast_nodes import all_nodes


def single_value(expr: ast.expr, names: AstNames) -> Optional[ast.expr]:
    """`expr` itself, or for a Name the one value it is ever assigned (None if unclear)."""
    if not isinstance(expr, ast.Name):
        return expr
    owner = names.binding_scope(expr)
    if owner is None:
        return None
    values = owner.values.get(expr.id, [])
    targets = owner.bindings.get(expr.id, [])
    if len(values) != 1 or targets[0] is not None or values[0] is None:
        return None
    return values[0]


def is_literal(ctx: AstContext, expr: Optional[ast.AST], *values: str) -> bool:
    """`expr` is one of the literal values given as code (`"True"`, `"0"`, `"None"`): True/False/None, or an
    integer written exactly so."""
    if not isinstance(expr, ast.Constant):
        return False
    value = expr.value
    if value is None or isinstance(value, bool):
        return repr(value) in values
    if isinstance(value, int):
        return ctx.segment(expr) in values
    return False


def _block_of(ctx: AstContext, statement: ast.stmt) -> Optional[tuple[ast.AST, list[ast.stmt]]]:
    """The statement list holding `statement` (a body, an `else`, a handler's body) and its owner."""
    owner = ctx.parent(statement)
    if owner is None:
        return None
    for name in ("body", "orelse", "finalbody"):
        block = getattr(owner, name, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return owner, block
    return None


def following(ctx: AstContext, statement: ast.stmt) -> list[ast.stmt]:
    """The statements after `statement` in the block that holds it (empty when it is in no block)."""
    held = _block_of(ctx, statement)
    if held is None:
        return []
    block = held[1]
    return block[next(i for i, s in enumerate(block) if s is statement) + 1:]


def _inside(ctx: AstContext, outer: ast.AST, node: ast.AST) -> bool:
    return any(a is outer for a in ctx.ancestors(node))


def value_at(ctx: AstContext, name: ast.Name) -> Optional[ast.expr]:
    """The value a name holds where it is read: its one assignment, or the last plain assignment before
    the read whose block also holds the read (`ds = load(); ds = ds.map(f); use(ds)`). None when a branch
    or a loop between them could leave another value, or when the name is also bound some other way."""
    names = ctx.names
    single = single_value(name, names)
    if single is not None:
        return single
    owner = names.binding_scope(name)
    if owner is None or ctx.order(name) is None:
        return None
    targets = owner.bindings.get(name.id, [])
    values = owner.values.get(name.id, [])
    if any(t is not None for t in targets) or not values or any(v is None for v in values):
        return None
    here = ctx.order(name)
    assert here is not None
    # `x = f(x)`: the read inside the value sees the value before it
    earlier = [v for v in values if v is not None and (ctx.order(v) or here) < here and not _inside(ctx, v, name)]
    if not earlier:
        return None
    last = earlier[-1]
    held = _block_of(ctx, ctx.statement(last))
    if held is None:
        return None
    block_owner, block = held
    if not any(_inside(ctx, s, name) for s in block):
        return None
    for loop in ctx.ancestors(name):  # assigned again later in a loop around the read: not straight-line
        if loop is block_owner:
            break
        if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) and any(
                v is not None and v is not last and _inside(ctx, loop, v) and (ctx.order(v) or 0) > here
                for v in values):
            return None
    return last


def self_attribute_value(ctx: AstContext, expr: ast.Attribute, skip_none: bool = False) -> Optional[ast.expr]:
    """For `self.x` inside a method: the one value the class ever assigns to `self.x`, else None.
    With `skip_none`, `self.x = None` placeholders (in `__init__`, before `setup()` fills it) are left out."""
    if not isinstance(expr.value, ast.Name):
        return None
    function = ctx.names.scope_of.get(id(expr.value))
    if function is None or function.parent is None or not function.parent.is_class:
        return None
    cls = function.parent.node
    if not isinstance(function.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not _is_self(function.node, expr.value.id):
        return None
    values: list[Optional[ast.expr]] = []
    for node in all_nodes(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if _same_attribute(target, expr):
                    values.append(node.value if len(node.targets) == 1 else None)
                elif isinstance(target, (ast.Tuple, ast.List)) and any(
                        _same_attribute(e.value if isinstance(e, ast.Starred) else e, expr) for e in target.elts):
                    # `self.a, self.b = split(ds, ...)`: the call whose result is unpacked
                    values.append(node.value if isinstance(node.value, ast.Call) and len(node.targets) == 1 else None)
        elif isinstance(node, ast.AnnAssign) and _same_attribute(node.target, expr):
            values.append(node.value)
        elif isinstance(node, ast.AugAssign) and _same_attribute(node.target, expr):
            values.append(None)
    if skip_none:
        values = [v for v in values if not (isinstance(v, ast.Constant) and v.value is None)]
    return values[0] if len(values) == 1 else None


def _is_self(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    params = list(function.args.posonlyargs) + list(function.args.args)
    return bool(params) and params[0].arg == name


def _same_attribute(target: ast.expr, expr: ast.Attribute) -> bool:
    return (isinstance(target, ast.Attribute) and target.attr == expr.attr
            and isinstance(target.value, ast.Name) and isinstance(expr.value, ast.Name)
            and target.value.id == expr.value.id)
