"""An autocast call's arguments by name, on LibCST, for GPU002's fix (the scaler's device type and
`enabled=`); the detectors read analysis/amp_dtypes.py on `ast`, whose `autocast_arguments` this mirrors."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.amp import AUTOCAST_DEPRECATED, OLD_AUTOCAST_ORDER
from gpulint.analysis.amp_dtypes import AUTOCAST_ORDER as _ORDER
from gpulint.core.arguments import positional_args
from gpulint.core.context import FileContext


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
