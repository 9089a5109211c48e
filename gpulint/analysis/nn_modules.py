"""nn.Module classes as the file defines them, on CPython's `ast`: which classes are modules, their
methods, the integers their constructors are given, and the parts of a function a walk can see.

Generic reading of model code, shared by the analyses that ask about models (analysis/deep_stacks.py).
It reads what the LibCST version before it read (issue 25: one tree for reading code), so GPU301's
findings did not move with the port. Anything unclear means "not known".
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from gpulint.analysis.ast_context import LOCAL, AstContext, FunctionNode
from gpulint.analysis.ast_values import single_value
from gpulint.core.torch_api import GRAD_OFF, NN_MODULE, SET_GRAD_ENABLED
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.records import dataclass

MAX_EVAL_DEPTH = 8


@dataclass(frozen=True)
class CallArg:
    """One argument as the source lists it (LibCST's `Arg`): `ast` keeps positional and keyword
    arguments apart, and the analyses ask about "the first argument" in source order."""

    keyword: Optional[str]
    star: str  # "", "*" or "**"
    value: ast.expr


def call_args(call: ast.Call) -> list[CallArg]:
    """The call's arguments in source order."""
    out: list[tuple[tuple[int, int], CallArg]] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            out.append(((arg.lineno, arg.col_offset), CallArg(None, "*", arg.value)))
        else:
            out.append(((arg.lineno, arg.col_offset), CallArg(None, "", arg)))
    for keyword in call.keywords:
        where = (keyword.lineno, keyword.col_offset)
        out.append((where, CallArg(keyword.arg, "**" if keyword.arg is None else "", keyword.value)))
    if call.keywords and call.args:
        out.sort(key=lambda item: item[0])
    return [arg for _, arg in out]


def module_classes(ctx: AstContext) -> dict[str, ast.ClassDef]:
    """Top-level classes of the file that subclass `nn.Module`, directly or through each other."""
    return ctx.analysis(_module_classes)


def _module_classes(ctx: AstContext) -> dict[str, ast.ClassDef]:
    classes = {s.name: s for s in ctx.tree.body if isinstance(s, ast.ClassDef)}
    found: dict[str, ast.ClassDef] = {}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in found and _has_module_base(ctx, cls, found):
                found[name] = cls
                changed = True
    return found


def _has_module_base(ctx: AstContext, cls: ast.ClassDef, known: dict[str, ast.ClassDef]) -> bool:
    for base in cls.bases:
        value = base.value if isinstance(base, ast.Starred) else base
        if ctx.qualname(value) in NN_MODULE:
            return True
        if isinstance(value, ast.Name) and local_class_name(ctx, value) in known:
            return True
    return False


def local_class_name(ctx: AstContext, name: ast.Name) -> Optional[str]:
    """The name, when it refers to a class defined once at the module's top level."""
    names = ctx.names
    if names.binding_scope(name) is not names.module_scope:
        return None
    if names.module_scope.bindings.get(name.id) != [LOCAL]:
        return None
    return name.id


def is_module_class(ctx: AstContext, cls: ast.ClassDef) -> bool:
    return _has_module_base(ctx, cls, module_classes(ctx))


def methods(cls: ast.ClassDef) -> dict[str, FunctionNode]:
    return {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


def self_name(fn: FunctionNode) -> Optional[str]:
    params = list(fn.args.posonlyargs) + list(fn.args.args)
    return params[0].arg if params else None


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def function_nodes(ctx: AstContext, fn: FunctionNode) -> list[ast.AST]:
    """`fn` and the nodes inside it (decorators and defaults too), in source order, not descending into
    nested functions, lambdas or classes (their bodies do not run here). Computed once per function."""
    memo = ctx.analysis(_function_memo)
    found = memo.get(id(fn))
    if found is None:
        nodes: list[ast.AST] = []
        stack: list[ast.AST] = [fn]
        while stack:
            node = stack.pop()
            nodes.append(node)
            if node is not fn and isinstance(node, _NESTED):
                continue
            stack.extend(child_nodes(node))
        nodes = sorted((n for n in nodes if ctx.order(n) is not None), key=lambda n: ctx.order(n) or 0)
        found = memo[id(fn)] = (nodes, {id(n) for n in nodes})
    return found[0]


def in_function(ctx: AstContext, fn: FunctionNode, node: ast.AST) -> bool:
    """`node` is one of `function_nodes(fn)` (not inside a nested function)."""
    function_nodes(ctx, fn)
    return id(node) in ctx.analysis(_function_memo)[id(fn)][1]


def _function_memo(ctx: AstContext) -> dict[int, tuple[list[ast.AST], set[int]]]:
    return {}


def ancestors_in(ctx: AstContext, fn: FunctionNode, node: ast.AST) -> Iterator[ast.AST]:
    """The ancestors of `node` up to `fn` itself."""
    for ancestor in ctx.ancestors(node):
        yield ancestor
        if ancestor is fn:
            return


def is_builtin(ctx: AstContext, name: ast.AST, builtin: str) -> bool:
    return isinstance(name, ast.Name) and name.id == builtin and ctx.names.binding_scope(name) is None


def self_attribute(expr: ast.AST, self_param: Optional[str]) -> Optional[str]:
    """`X` for `self.X`."""
    if (
        self_param is not None
        and isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == self_param
    ):
        return expr.attr
    return None


def int_value(ctx: AstContext, expr: ast.expr, fn: Optional[FunctionNode], depth: int = 0) -> Optional[int]:
    """The int an expression always has: literals, module constants, a parameter's default, arithmetic."""
    if depth > MAX_EVAL_DEPTH:
        return None
    if isinstance(expr, ast.Constant):
        return expr.value if type(expr.value) is int else None
    if isinstance(expr, ast.BinOp):
        left = int_value(ctx, expr.left, fn, depth + 1)
        right = int_value(ctx, expr.right, fn, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(expr.op, ast.Add):
            return left + right
        if isinstance(expr.op, ast.Sub):
            return left - right
        if isinstance(expr.op, ast.Mult):
            return left * right
        if isinstance(expr.op, ast.FloorDiv) and right:
            return left // right
        return None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and fn is not None \
            and expr.value.id != self_name(fn):
        # `config.n_layer` / `args.depth`: the default of a dataclass field or a command-line option
        # of that name, when the project defines exactly one
        default = ctx.project.own.argparse_defaults.get(expr.attr)
        if type(default) is int:
            return default
        return ctx.project.dataclass_int(expr.attr)
    if not isinstance(expr, ast.Name):
        return None
    owner = ctx.names.binding_scope(expr)
    if owner is None:
        return None
    if fn is not None and owner is ctx.names.scopes.get(id(fn)):
        default = _param_default(fn, expr.id)
        if default is not None:
            # a parameter that the function never rebinds: its default is the value we know
            if len(owner.bindings.get(expr.id, [])) != 1:
                return None
            return int_value(ctx, default, None, depth + 1)
    value = single_value(expr, ctx.names)
    return int_value(ctx, value, fn, depth + 1) if value is not None else None


def _param_default(fn: FunctionNode, name: str) -> Optional[ast.expr]:
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for param, default in zip(positional + list(args.kwonlyargs), defaults + list(args.kw_defaults)):
        if param.arg == name:
            return default
    return None


def range_length(ctx: AstContext, expr: ast.expr, fn: Optional[FunctionNode]) -> Optional[int]:
    """len(range(...)) for `range(n)` / `range(a, b)` with known ints; None otherwise."""
    if not isinstance(expr, ast.Call) or not is_builtin(ctx, expr.func, "range"):
        return None
    if expr.keywords or any(isinstance(a, ast.Starred) for a in expr.args) or not 1 <= len(expr.args) <= 2:
        return None
    values: list[int] = []
    for arg in expr.args:
        value = int_value(ctx, arg, fn)
        if value is None:
            return None
        values.append(value)
    start, stop = (0, values[0]) if len(values) == 1 else (values[0], values[1])
    return max(0, stop - start)


def is_range_call(ctx: AstContext, expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and is_builtin(ctx, expr.func, "range")


def forward_methods(ctx: AstContext, cls: ast.ClassDef) -> list[FunctionNode]:
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
        for node in function_nodes(ctx, fn):
            if isinstance(node, ast.Call):
                name = self_attribute(node.func, me)
                if name in table and name not in order and name != "__init__":
                    order.append(name)
    return [table[name] for name in order]


def grad_off_decorated(ctx: AstContext, fn: FunctionNode) -> bool:
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ctx.qualname(target) in GRAD_OFF:
            return True
    return False


def under_grad_off(ctx: AstContext, fn: FunctionNode, node: ast.AST) -> bool:
    """Inside `with torch.no_grad()` / `inference_mode()` / `set_grad_enabled(False)` in `fn`."""
    for ancestor in ancestors_in(ctx, fn, node):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)):
            for item in ancestor.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call):
                    qualified = ctx.qualname(expr.func)
                    if qualified in GRAD_OFF:
                        return True
                    args = call_args(expr)
                    if qualified in SET_GRAD_ENABLED and args and isinstance(args[0].value, ast.Constant) \
                            and args[0].value.value is False:
                        return True
    return False
