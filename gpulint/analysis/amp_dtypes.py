"""Which dtype an autocast call runs in, as far as the file shows, on CPython's `ast` (issue 25).

Written dtypes, the defaults of each autocast spelling, and a dtype chosen at run time from a table or a
conditional expression (GPU004, GPU404; GPU002 reads the arguments and keeps its own dtype test). The names
of the answers live here; analysis/autocast_dtype.py maps the arguments on LibCST for GPU002's fix.
"""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.amp import AUTOCAST_DEPRECATED, BFLOAT16, FLOAT16, OLD_AUTOCAST_ORDER
from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.ast_values import is_literal, single_value

FLOAT16_DTYPE = "float16"
BFLOAT16_DTYPE = "bfloat16"
MAYBE_FLOAT16 = "float16 or another dtype"  # chosen at run time from choices that include float16
AUTOCAST_ORDER = ("device_type", "dtype", "enabled", "cache_enabled")


def autocast_arguments(ctx: AstContext, call: ast.Call) -> Optional[dict[str, ast.expr]]:
    """The autocast's arguments by name (positions mapped per spelling); None when a `**dict` or `*args`
    hides some."""
    kwargs = ctx.kwargs(call)
    if not kwargs.complete or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    order = OLD_AUTOCAST_ORDER if ctx.qualname(call.func) in AUTOCAST_DEPRECATED else AUTOCAST_ORDER
    out: dict[str, ast.expr] = {}
    for index, argument in enumerate(call.args):
        if index < len(order):
            out[order[index]] = argument
    for key, value in kwargs.explicit.items():
        if value is None:
            return None
        out[key] = value
    return out


def _first_argument(call: ast.Call) -> Optional[ast.expr]:
    """The argument written first (positional, else keyword), as LibCST's `call.args[0].value`."""
    if call.args:
        first = call.args[0]
        return first.value if isinstance(first, ast.Starred) else first
    return call.keywords[0].value if call.keywords else None


def device_type(ctx: AstContext, expr: Optional[ast.expr]) -> Optional[str]:
    """"cuda"/"cpu" when the device type is visible ("cuda" if a GPU is used when present)."""
    if expr is None:
        return None
    if isinstance(expr, ast.Attribute) and expr.attr == "type" and isinstance(expr.value, ast.Name):
        value = single_value(expr.value, ctx.names)
        if isinstance(value, ast.Call) and ctx.qualname(value.func) == "torch.device":
            return device_type(ctx, _first_argument(value))
        return None
    if isinstance(expr, ast.Name):
        return device_type(ctx, single_value(expr, ctx.names))
    if isinstance(expr, ast.IfExp):
        kinds = {device_type(ctx, expr.body), device_type(ctx, expr.orelse)}
        return "cuda" if "cuda" in kinds else None
    if not (isinstance(expr, ast.Constant) and isinstance(expr.value, str)):
        return None
    kind = expr.value.split(":")[0]
    return kind if kind in ("cuda", "cpu") else None


def dtype_choices(ctx: AstContext, expr: ast.expr, depth: int = 0) -> Optional[frozenset[str]]:
    """The 16-bit dtypes a dtype expression can be ("float16", "bfloat16", "other"): a written dtype, a
    name assigned once, a conditional expression, or a lookup in a literal table. None when unknown."""
    if depth > 4:
        return None
    target = ctx.qualname(expr)
    if target in FLOAT16:
        return frozenset({FLOAT16_DTYPE})
    if target in BFLOAT16:
        return frozenset({BFLOAT16_DTYPE})
    if target is not None and target.startswith("torch.") and isinstance(expr, ast.Attribute):
        return frozenset({"other"})  # torch.float32 and friends
    if isinstance(expr, ast.Name):
        value = single_value(expr, ctx.names)
        return None if value is None or value is expr else dtype_choices(ctx, value, depth + 1)
    if isinstance(expr, ast.IfExp):
        body, orelse = dtype_choices(ctx, expr.body, depth + 1), dtype_choices(ctx, expr.orelse, depth + 1)
        return None if body is None or orelse is None else body | orelse
    if isinstance(expr, ast.Subscript):
        table: Optional[ast.expr] = expr.value
        if isinstance(table, ast.Name):
            table = single_value(table, ctx.names)
        if not isinstance(table, ast.Dict):
            return None
        out: set[str] = set()
        for key, value in zip(table.keys, table.values):
            if key is None:
                return None  # `{**other}`
            choice = dtype_choices(ctx, value, depth + 1)
            if choice is None:
                return None
            out |= choice
        return frozenset(out)
    return None


def enabled_autocast_arguments(ctx: AstContext, expr: ast.expr) -> Optional[dict[str, ast.expr]]:
    """The arguments of an autocast call by name, or None when it is no call, unreadable, or `enabled=False`."""
    if not isinstance(expr, ast.Call):
        return None
    args = autocast_arguments(ctx, expr)
    if args is None or ("enabled" in args and is_literal(ctx, args["enabled"], "False")):
        return None
    return args


def autocast_dtype(ctx: AstContext, expr: ast.expr) -> Optional[str]:
    """FLOAT16_DTYPE, BFLOAT16_DTYPE, MAYBE_FLOAT16 (a run-time choice that includes float16), or None when
    the autocast is disabled or its dtype unknown."""
    args = enabled_autocast_arguments(ctx, expr)
    if args is None or not isinstance(expr, ast.Call):
        return None
    if "dtype" in args:
        choices = dtype_choices(ctx, args["dtype"])
        if choices == {FLOAT16_DTYPE}:
            return FLOAT16_DTYPE
        if choices == {BFLOAT16_DTYPE}:
            return BFLOAT16_DTYPE
        if choices is not None and FLOAT16_DTYPE in choices and not isinstance(args["dtype"], ast.IfExp):
            return MAYBE_FLOAT16
        return None
    target = ctx.qualname(expr.func) or ""
    if target in AUTOCAST_DEPRECATED:
        return FLOAT16_DTYPE if target.startswith("torch.cuda.") else BFLOAT16_DTYPE
    device = device_type(ctx, args.get("device_type"))
    return {"cuda": FLOAT16_DTYPE, "cpu": BFLOAT16_DTYPE}.get(device or "")
