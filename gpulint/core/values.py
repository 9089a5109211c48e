"""What a name holds, when the file shows it plainly."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.core.names import NameTable
from gpulint.core.walk import walk


def string_value(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """The text of a plain string literal (`"cuda"`), else None."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


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


def self_attribute_value(expr: cst.Attribute, names: NameTable,
                         skip_none: bool = False) -> Optional[cst.BaseExpression]:
    """For `self.x` inside a method: the one value the class ever assigns to `self.x`, else None.
    With `skip_none`, `self.x = None` placeholders (in `__init__`, before `setup()` fills it) are left out."""
    if not isinstance(expr.value, cst.Name):
        return None
    function = names.scope_of.get(id(expr.value))
    if function is None or function.parent is None or not function.parent.is_class:
        return None
    cls = function.parent.node
    if not isinstance(function.node, cst.FunctionDef) or not _is_self(function.node, expr.value.value):
        return None
    values: list[Optional[cst.BaseExpression]] = []

    class _Stores(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if _same_attribute(target.target, expr):
                    values.append(node.value if len(node.targets) == 1 else None)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and any(
                        _same_attribute(e.value, expr) for e in target.target.elements):
                    # `self.a, self.b = split(ds, ...)`: the call whose result is unpacked
                    values.append(node.value if isinstance(node.value, cst.Call) and len(node.targets) == 1 else None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if _same_attribute(node.target, expr):
                values.append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if _same_attribute(node.target, expr):
                values.append(None)

    walk(cls, _Stores())
    if skip_none:
        values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    return values[0] if len(values) == 1 else None


def _is_self(function: cst.FunctionDef, name: str) -> bool:
    params = list(function.params.posonly_params) + list(function.params.params)
    return bool(params) and params[0].name.value == name


def _same_attribute(target: cst.BaseExpression, expr: cst.Attribute) -> bool:
    return (isinstance(target, cst.Attribute) and target.attr.value == expr.attr.value
            and isinstance(target.value, cst.Name) and isinstance(expr.value, cst.Name)
            and target.value.value == expr.value.value)

