"""What a name holds, when the file shows it plainly."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.names import NameTable


def single_value(expr: cst.BaseExpression, names: NameTable) -> Optional[cst.BaseExpression]:
    """`expr` itself, or for a Name the one value it is ever assigned (None if unclear)."""
    if not isinstance(expr, cst.Name):
        return expr
    owner = names.binding_scope(expr)
    if owner is None:
        return None
    values = owner.values.get(expr.value, [])
    targets = owner.bindings.get(expr.value, [])
    if len(values) != 1 or targets[0] is not None or values[0] is None:
        return None
    return values[0]

