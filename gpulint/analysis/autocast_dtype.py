"""Which dtype an autocast call runs in, as far as the file shows (GPU002, GPU004).

One reading for every rule that asks "is this step float16 or bfloat16?": written dtypes,
the defaults of each autocast spelling, and a dtype chosen at run time from a table or a
conditional expression. analysis/amp_dtypes.py reads the same on `ast` (GPU004, GPU404); this
LibCST twin stays for GPU002 until its detector moves to `ast`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.amp import AUTOCAST_DEPRECATED, BFLOAT16, FLOAT16, OLD_AUTOCAST_ORDER
from gpulint.analysis.amp_dtypes import AUTOCAST_ORDER as _ORDER
from gpulint.analysis.amp_dtypes import BFLOAT16_DTYPE, FLOAT16_DTYPE, MAYBE_FLOAT16
from gpulint.core.arguments import positional_args
from gpulint.core.context import FileContext
from gpulint.core.rewrite import is_literal
from gpulint.core.values import single_value, string_value


def autocast_arguments(ctx: FileContext, call: cst.Call) -> Optional[dict[str, cst.BaseExpression]]:
    """The autocast's arguments by name (positions mapped per spelling); None when a `**dict` or `*args`
    hides some."""
    kwargs = ctx.kwargs(call)
    if not kwargs.complete or any(a.star == "*" for a in call.args):
        return None
    deprecated = ctx.qualname(call.func) in AUTOCAST_DEPRECATED
    order = OLD_AUTOCAST_ORDER if deprecated else _ORDER
    out: dict[str, cst.BaseExpression] = {}
    for index, argument in enumerate(positional_args(call, ignore_starred=True)):
        if index < len(order):
            out[order[index]] = argument
    for key, value in kwargs.values.items():
        if value is None:
            return None
        out[key] = value
    return out


def device_type(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """"cuda"/"cpu" when the device type is visible ("cuda" if a GPU is used when present)."""
    if expr is None:
        return None
    if isinstance(expr, cst.Attribute) and expr.attr.value == "type" and isinstance(expr.value, cst.Name):
        value = single_value(expr.value, ctx.names)
        if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.device" and value.args:
            return device_type(ctx, value.args[0].value)
        return None
    if isinstance(expr, cst.Name):
        return device_type(ctx, single_value(expr, ctx.names))
    if isinstance(expr, cst.IfExp):
        kinds = {device_type(ctx, expr.body), device_type(ctx, expr.orelse)}
        return "cuda" if "cuda" in kinds else None
    text = string_value(expr)
    if text is None:
        return None
    kind = text.split(":")[0]
    return kind if kind in ("cuda", "cpu") else None


def dtype_choices(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> Optional[frozenset[str]]:
    """The 16-bit dtypes a dtype expression can be ("float16", "bfloat16", "other"): a written dtype, a
    name assigned once, a conditional expression, or a lookup in a literal table. None when unknown."""
    if depth > 4:
        return None
    target = ctx.qualname(expr)
    if target in FLOAT16:
        return frozenset({FLOAT16_DTYPE})
    if target in BFLOAT16:
        return frozenset({BFLOAT16_DTYPE})
    if target is not None and target.startswith("torch.") and isinstance(expr, cst.Attribute):
        return frozenset({"other"})  # torch.float32 and friends
    if isinstance(expr, cst.Name):
        value = single_value(expr, ctx.names)
        return None if value is None or value is expr else dtype_choices(ctx, value, depth + 1)
    if isinstance(expr, cst.IfExp):
        body, orelse = dtype_choices(ctx, expr.body, depth + 1), dtype_choices(ctx, expr.orelse, depth + 1)
        return None if body is None or orelse is None else body | orelse
    if isinstance(expr, cst.Subscript):
        table = expr.value
        if isinstance(table, cst.Name):
            table = single_value(table, ctx.names)  # type: ignore[assignment]
        if not isinstance(table, cst.Dict):
            return None
        out: set[str] = set()
        for element in table.elements:
            if not isinstance(element, cst.DictElement):
                return None
            choice = dtype_choices(ctx, element.value, depth + 1)
            if choice is None:
                return None
            out |= choice
        return frozenset(out)
    return None


def autocast_dtype(ctx: FileContext, expr: cst.BaseExpression) -> Optional[str]:
    """FLOAT16_DTYPE, BFLOAT16_DTYPE, MAYBE_FLOAT16 (a run-time choice that includes float16), or None when
    the autocast is disabled or its dtype unknown."""
    if not isinstance(expr, cst.Call):
        return None
    args = autocast_arguments(ctx, expr)
    if args is None:
        return None
    if "enabled" in args and is_literal(args["enabled"], "False"):
        return None
    if "dtype" in args:
        choices = dtype_choices(ctx, args["dtype"])
        if choices == {FLOAT16_DTYPE}:
            return FLOAT16_DTYPE
        if choices == {BFLOAT16_DTYPE}:
            return BFLOAT16_DTYPE
        if choices is not None and FLOAT16_DTYPE in choices and not isinstance(args["dtype"], cst.IfExp):
            return MAYBE_FLOAT16
        return None
    target = ctx.qualname(expr.func) or ""
    if target in AUTOCAST_DEPRECATED:
        return FLOAT16_DTYPE if target.startswith("torch.cuda.") else BFLOAT16_DTYPE
    device = device_type(ctx, args.get("device_type"))
    return {"cuda": FLOAT16_DTYPE, "cpu": BFLOAT16_DTYPE}.get(device or "")
