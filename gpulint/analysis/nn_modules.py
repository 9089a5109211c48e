"""nn.Module classes as the file defines them: which classes are modules, their methods, the
integers their constructors are given, and the parts of a function a walk can see.

Generic reading of model code, shared by the analyses that ask about models (analysis/deep_stacks.py).
Anything unclear means "not known".
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gpulint.core.context import FileContext
from gpulint.core.names import LOCAL
from gpulint.core.torch_api import NN_MODULE
from gpulint.core.values import single_value
from gpulint.core.walk import walk

GRAD_OFF = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
})

MAX_EVAL_DEPTH = 8

def module_classes(ctx: FileContext) -> dict[str, cst.ClassDef]:
    """Top-level classes of the file that subclass `nn.Module`, directly or through each other."""
    return ctx.analysis(_module_classes)

def _module_classes(ctx: FileContext) -> dict[str, cst.ClassDef]:
    classes = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.ClassDef)}
    found: dict[str, cst.ClassDef] = {}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in found and _has_module_base(ctx, cls, found):
                found[name] = cls
                changed = True
    return found

def _has_module_base(ctx: FileContext, cls: cst.ClassDef, known: dict[str, cst.ClassDef]) -> bool:
    for base in cls.bases:
        if base.keyword is not None:
            continue
        if ctx.qualname(base.value) in NN_MODULE:
            return True
        if isinstance(base.value, cst.Name) and local_class_name(ctx, base.value) in known:
            return True
    return False

def local_class_name(ctx: FileContext, name: cst.Name) -> Optional[str]:
    """The name, when it refers to a class defined once at the module's top level."""
    owner = ctx.names.binding_scope(name)
    if owner is not ctx.names.module_scope:
        return None
    if ctx.names.module_scope.bindings.get(name.value) != [LOCAL]:
        return None
    return name.value

def is_module_class(ctx: FileContext, cls: cst.ClassDef) -> bool:
    return _has_module_base(ctx, cls, module_classes(ctx))

def methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    out: dict[str, cst.FunctionDef] = {}
    if isinstance(cls.body, cst.IndentedBlock):
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef):
                out[statement.name.value] = statement
    return out

def self_name(fn: cst.FunctionDef) -> Optional[str]:
    params = list(fn.params.posonly_params) + list(fn.params.params)
    return params[0].name.value if params else None

class FunctionTree(cst.CSTVisitor):
    """Parent links inside one function, not descending into nested functions, lambdas or classes."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.parent: dict[int, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.parent[id(node)] = self.stack[-1]
        self.stack.append(node)
        self.nodes.append(node)
        if node is not self.root and isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

def function_tree(fn: cst.FunctionDef) -> FunctionTree:
    walker = FunctionTree(fn)
    walk(fn, walker, skip=None)  # every node, layout included, as LibCST's visit gives them
    return walker

def ancestors_in(tree: FunctionTree, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    current = tree.parent.get(id(node))
    while current is not None:
        yield current
        current = tree.parent.get(id(current))

def is_builtin(ctx: FileContext, name: cst.BaseExpression, builtin: str) -> bool:
    return isinstance(name, cst.Name) and name.value == builtin and ctx.names.binding_scope(name) is None

def self_attribute(expr: cst.CSTNode, self_param: Optional[str]) -> Optional[str]:
    """`X` for `self.X`."""
    if (
        self_param is not None
        and isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == self_param
    ):
        return expr.attr.value
    return None

def int_value(ctx: FileContext, expr: cst.BaseExpression, fn: Optional[cst.FunctionDef],
              depth: int = 0) -> Optional[int]:
    """The int an expression always has: literals, module constants, a parameter's default, arithmetic."""
    if depth > MAX_EVAL_DEPTH:
        return None
    if isinstance(expr, cst.Integer):
        number = expr.evaluated_value
        return number if isinstance(number, int) else None
    if isinstance(expr, cst.BinaryOperation):
        left = int_value(ctx, expr.left, fn, depth + 1)
        right = int_value(ctx, expr.right, fn, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(expr.operator, cst.Add):
            return left + right
        if isinstance(expr.operator, cst.Subtract):
            return left - right
        if isinstance(expr.operator, cst.Multiply):
            return left * right
        if isinstance(expr.operator, cst.FloorDivide) and right:
            return left // right
        return None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and fn is not None \
            and expr.value.value != self_name(fn):
        # `config.n_layer` / `args.depth`: the default of a dataclass field or a command-line option
        # of that name, when the project defines exactly one
        field = expr.attr.value
        default = ctx.project.own.argparse_defaults.get(field)
        if type(default) is int:
            return default
        return ctx.project.dataclass_int(field)
    if not isinstance(expr, cst.Name):
        return None
    owner = ctx.names.binding_scope(expr)
    if owner is None:
        return None
    if fn is not None and owner is ctx.names.scopes.get(id(fn)):
        default = _param_default(fn, expr.value)
        if default is not None:
            # a parameter that the function never rebinds: its default is the value we know
            if len(owner.bindings.get(expr.value, [])) != 1:
                return None
            return int_value(ctx, default, None, depth + 1)
    value = single_value(expr, ctx.names)
    return int_value(ctx, value, fn, depth + 1) if value is not None else None

def _param_default(fn: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    for param in params:
        if param.name.value == name:
            return param.default
    return None

def range_length(ctx: FileContext, expr: cst.BaseExpression, fn: Optional[cst.FunctionDef]) -> Optional[int]:
    """len(range(...)) for `range(n)` / `range(a, b)` with known ints; None otherwise."""
    if not isinstance(expr, cst.Call) or not is_builtin(ctx, expr.func, "range"):
        return None
    if any(arg.keyword is not None or arg.star for arg in expr.args) or not 1 <= len(expr.args) <= 2:
        return None
    values: list[int] = []
    for arg in expr.args:
        value = int_value(ctx, arg.value, fn)
        if value is None:
            return None
        values.append(value)
    start, stop = (0, values[0]) if len(values) == 1 else (values[0], values[1])
    return max(0, stop - start)

def is_range_call(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and is_builtin(ctx, expr.func, "range")

def forward_methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """`forward` and the methods of the class it calls through `self.<name>(...)`, transitively."""
    table = methods(cls)
    if "forward" not in table:
        return []
    order = ["forward"]
    index = 0
    while index < len(order):
        fn = table[order[index]]
        index += 1
        me = self_name(fn)
        for node in function_tree(fn).nodes:
            if isinstance(node, cst.Call):
                name = self_attribute(node.func, me)
                if name in table and name not in order and name != "__init__":
                    order.append(name)
    return [table[name] for name in order]

def grad_off_decorated(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    for decorator in fn.decorators:
        target = decorator.decorator
        if isinstance(target, cst.Call):
            target = target.func
        if ctx.qualname(target) in GRAD_OFF:
            return True
    return False

def under_grad_off(ctx: FileContext, tree: FunctionTree, node: cst.CSTNode) -> bool:
    for ancestor in ancestors_in(tree, node):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                expr = item.item
                if isinstance(expr, cst.Call):
                    qualified = ctx.qualname(expr.func)
                    if qualified in GRAD_OFF:
                        return True
                    if qualified in {"torch.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"} and (
                        expr.args and isinstance(expr.args[0].value, cst.Name) and expr.args[0].value.value == "False"
                    ):
                        return True
    return False
