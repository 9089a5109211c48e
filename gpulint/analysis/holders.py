"""What a variable holds, on `ast`: the values assigned to a name or to `self.x`, followed into the
functions of the file it is passed to.

Rules that tie two calls together (a GradScaler that steps *this* optimizer, a loop over *this*
DataLoader) need to know that two expressions read the same variable and what was stored in it.
Only plain assignments count: a variable that is also bound some other way (a loop target, an
import, `with ... as`, augmented assignment) holds something this module cannot see, and the
answer is None ("not known"), never an empty list.
"""

from __future__ import annotations

import ast
from typing import Optional, Union

from gpulint.analysis.ast_context import AstContext, AstScope
from gpulint.project.ast_nodes import walk as walk_nodes

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_DEPTH = 3  # how many calls deep a parameter is followed to its callers' arguments


def holder_of(ctx: AstContext, node: ast.expr) -> Optional[ast.expr]:
    """The name or `self.x` the value of `node` is assigned to (`opt = SGD(...)`, `self.loader: X = ...`)."""
    parent = ctx.parent(node)
    target: Optional[ast.expr] = None
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node:
        target = parent.targets[0]
    elif isinstance(parent, ast.AnnAssign) and parent.value is node:
        target = parent.target
    elif isinstance(parent, ast.NamedExpr) and parent.value is node:
        target = parent.target
    if isinstance(target, ast.Name) or _self_attribute(target) is not None:
        return target
    return None


def _self_attribute(expr: Optional[ast.AST]) -> Optional[str]:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def _class_of(ctx: AstContext, node: ast.AST) -> Optional[ast.ClassDef]:
    return next((a for a in ctx.ancestors(node) if isinstance(a, ast.ClassDef)), None)


def same_variable(ctx: AstContext, a: ast.AST, b: ast.AST) -> bool:
    """`a` and `b` read the same variable: one binding of a name, or `self.x` in one class."""
    names = ctx.names
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        owner = names.binding_scope(a)
        return a.id == b.id and owner is not None and owner is names.binding_scope(b)
    attr = _self_attribute(a)
    if attr is not None and attr == _self_attribute(b):
        owner_class = _class_of(ctx, a)
        return owner_class is not None and owner_class is _class_of(ctx, b)
    return False


def held_values(ctx: AstContext, expr: ast.expr, depth: int = 0) -> Optional[list[ast.expr]]:
    """Every value `expr` may hold where it is read: itself when it is not a variable; for a name, each
    value its scope assigns it (a parameter: each argument the file's calls of its function pass);
    for `self.x`, each value any method of the class assigns. None when some binding is not visible."""
    if isinstance(expr, ast.Name):
        return _name_values(ctx, expr, depth)
    attr = _self_attribute(expr)
    if attr is not None:
        owner_class = _class_of(ctx, expr)
        if owner_class is None:
            return None
        values: list[ast.expr] = []
        for node in walk_nodes(owner_class):
            targets: list[ast.expr] = []
            value: Optional[ast.expr] = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets, value = [node.target], node.value if isinstance(node, ast.AnnAssign) else None
            for target in targets:
                for element in _flat(target):
                    if _self_attribute(element) == attr:
                        if value is None or element is not target:
                            return None  # `self.x += 1`, `self.x, self.y = pair`
                        values.append(value)
        return values or None
    return [expr]


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for element in target.elts for leaf in _flat(element)]
    if isinstance(target, ast.Starred):
        return _flat(target.value)
    return [target]


def _name_values(ctx: AstContext, name: ast.Name, depth: int) -> Optional[list[ast.expr]]:
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return None
    targets = owner.bindings.get(name.id, [])
    assigned = owner.values.get(name.id, [])
    if any(t is not None for t in targets):
        return None  # an import
    values: list[ast.expr] = []
    for value in assigned:
        if value is not None:
            values.append(value)
            continue
        passed = _passed_values(ctx, owner, name.id, depth) if depth < _DEPTH else None
        if passed is None:
            return None
        values.extend(passed)
    return values or None


def _parameter_position(function: FunctionNode, name: str) -> tuple[bool, Optional[int]]:
    """Whether `name` is a parameter of `function`, and its position (None: keyword-only)."""
    positional = [*function.args.posonlyargs, *function.args.args]
    for index, param in enumerate(positional):
        if param.arg == name:
            return True, index
    return any(p.arg == name for p in function.args.kwonlyargs), None


def _passed_values(ctx: AstContext, owner: AstScope, name: str, depth: int) -> Optional[list[ast.expr]]:
    """The arguments the file's calls of a module-level function pass as its parameter `name`; None
    unless the name is bound only as that parameter and every call of the function can be read."""
    function = owner.node
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or owner.parent is not ctx.names.module_scope:
        return None
    if len(owner.bindings.get(name, [])) != 1:
        return None  # the parameter is also reassigned in the body
    is_param, position = _parameter_position(function, name)
    if not is_param:
        return None
    values: list[ast.expr] = []
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Name) and call.func.id == function.name
                and ctx.names.binding_scope(call.func) is ctx.names.module_scope):
            continue
        argument = next((k.value for k in call.keywords if k.arg == name), None)
        if argument is None and position is not None:
            if any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
                return None
            if len(call.args) > position:
                argument = call.args[position]
        if argument is None:
            return None  # the default, or a `**options` that may pass it: not followed
        found = held_values(ctx, argument, depth + 1)
        if found is None:
            return None
        values.extend(found)
    return values or None
