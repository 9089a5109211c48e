"""A light alias table: which names a file binds, and to what, scope by scope.

Rules match qualified names (`torch.optim.Adam`), resolved through the file's imports
(`import torch.optim as optim`, `from torch.utils import data`). Any name that the file
also binds some other way (a class, a def, an assignment, a parameter) resolves to
nothing, so a user's own `Adam` or `DataLoader` is never taken for torch's.
This is much cheaper than LibCST's QualifiedNameProvider and enough for our rules.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional, Union

import libcst as cst

from gpulint.core.walk import walk
from gpulint.records import dataclass

LOCAL = None  # binding marker for anything that is not an import


@dataclass(eq=False)
class Scope:
    node: cst.CSTNode
    parent: Optional["Scope"]
    is_class: bool = False
    # name -> qualified import targets, with LOCAL for non-import bindings
    bindings: dict[str, list[Optional[str]]] = field(default_factory=dict)
    # name -> values assigned to it with a plain `name = value` (None for other bindings)
    values: dict[str, list[Optional[cst.BaseExpression]]] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)

    def bind(self, name: str, target: Optional[str], value: Optional[cst.BaseExpression] = None) -> None:
        scope = self._owner(name)
        scope.bindings.setdefault(name, []).append(target)
        scope.values.setdefault(name, []).append(value)

    def _owner(self, name: str) -> "Scope":
        if name in self.globals_:
            root = self
            while root.parent is not None:
                root = root.parent
            return root
        return self

    def lookup(self, name: str) -> Optional["Scope"]:
        """The scope whose binding of `name` is visible here (Python's LEGB, classes skipped)."""
        scope: Optional[Scope] = self
        first = True
        while scope is not None:
            if (first or not scope.is_class) and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None


def dotted(expr: cst.BaseExpression) -> Optional[str]:
    """`self.opt` / `torch.optim` for an attribute chain over a name, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    return None


class _Binder(cst.CSTVisitor):
    """One pass over the module: scopes, bindings, and the scope of every Name."""

    def __init__(self, names: "NameTable") -> None:
        self.names = names
        self.stack: list[Scope] = [names.module_scope]

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    # -- scopes -------------------------------------------------------------
    def _push(self, node: cst.CSTNode, is_class: bool = False) -> None:
        scope = Scope(node=node, parent=self.scope, is_class=is_class)
        self.names.scopes[id(node)] = scope
        self.stack.append(scope)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.bind(node.name.value, LOCAL)
        # decorators, defaults and annotations belong to the enclosing scope; visit them here
        for dec in node.decorators:
            walk(dec, self)
        walk(node.params, self)
        if node.returns is not None:
            walk(node.returns, self)
        self._push(node)
        for param in _all_params(node.params):
            self.scope.bind(param.name.value, LOCAL)
        walk(node.body, self)
        self.stack.pop()
        return False  # type: ignore[return-value]

    def visit_Param(self, node: cst.Param) -> bool:
        # the parameter name is bound in the function scope (done above); only visit defaults
        if node.default is not None:
            walk(node.default, self)
        if node.annotation is not None:
            walk(node.annotation, self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        walk(node.params, self)
        self._push(node)
        for param in _all_params(node.params):
            self.scope.bind(param.name.value, LOCAL)
        walk(node.body, self)
        self.stack.pop()
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.bind(node.name.value, LOCAL)
        for dec in node.decorators:
            walk(dec, self)
        for arg in node.bases:
            walk(arg, self)
        for arg in node.keywords:
            walk(arg, self)
        self._push(node, is_class=True)
        walk(node.body, self)
        self.stack.pop()
        return False

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.scope.globals_.add(item.name.value)

    # -- names --------------------------------------------------------------
    def visit_Name(self, node: cst.Name) -> None:
        self.names.scope_of[id(node)] = self.scope

    # -- bindings -----------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bind(alias.asname.name.value, name)
            else:
                top = name.split(".")[0]
                self.scope.bind(top, top)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        # a relative import keeps its dots (`from .data import X` -> ".data.X"): never a torch name,
        # but the project model (project/view.py) knows the classes behind it by that spelling
        base = dotted(node.module) if node.module is not None else ""
        module = "." * len(node.relative) + (base or "") if base is not None else None
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            target = (f"{module}.{name}" if base else f"{module}{name}") if module else LOCAL
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bind(alias.asname.name.value, target)
            else:
                self.scope.bind(name, target)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target, None)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_target(node.target, None)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name, None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind_target(node.name.name, None)

    def visit_Del(self, node: cst.Del) -> bool:
        return False  # `del x` after its last use changes no value the rules read

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            self.names.note_mutation(self.scope, func.value.value, node)

    def _bind_target(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(target, cst.Name):
            self.scope.bind(target.value, LOCAL, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value, None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self.names.note_mutation(self.scope, target.value.value, target)


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


class NameTable:
    """Scopes and bindings of one module, and qualified-name resolution over them."""

    def __init__(self, module: cst.Module) -> None:
        self.module_scope = Scope(node=module, parent=None)
        self.scopes: dict[int, Scope] = {id(module): self.module_scope}
        self.scope_of: dict[int, Scope] = {}
        self._mutations: list[tuple[Scope, str, cst.CSTNode]] = []
        walk(module, _Binder(self))

    def note_mutation(self, scope: Scope, name: str, node: cst.CSTNode) -> None:
        # `kw.update(...)`, `kw["k"] = v`: matched to a binding once all bindings are known
        self._mutations.append((scope, name, node))

    def mutations_of(self, owner: Scope, name: str) -> list[cst.CSTNode]:
        """Method calls and subscript stores on the binding of `name` owned by `owner`."""
        return [node for scope, n, node in self._mutations if n == name and scope.lookup(name) is owner]

    def resolve_name(self, node: cst.Name) -> Optional[str]:
        scope = self.scope_of.get(id(node))
        if scope is None:
            return None
        owner = scope.lookup(node.value)
        if owner is None:
            return None
        targets = owner.bindings[node.value]
        if LOCAL in targets or len(set(targets)) != 1:
            return None
        return targets[0]

    def qualified_name(self, expr: Union[cst.BaseExpression, cst.CSTNode]) -> Optional[str]:
        """`torch.optim.Adam` for `optim.Adam` after `import torch.optim as optim`, else None."""
        if isinstance(expr, cst.Name):
            return self.resolve_name(expr)
        if isinstance(expr, cst.Attribute):
            base = self.qualified_name(expr.value)
            return f"{base}.{expr.attr.value}" if base else None
        return None

    def binding_scope(self, node: cst.Name) -> Optional[Scope]:
        scope = self.scope_of.get(id(node))
        return scope.lookup(node.value) if scope is not None else None


class NameUses(cst.CSTVisitor):
    """The names a piece of code reads and binds, by spelling; `loaded` are the Name nodes read.

    Attribute names and keyword names are not names; a nested def or class binds its name and
    is not entered (its body does not run here).
    """

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.loaded: list[cst.Name] = []

    @classmethod
    def of(cls, *nodes: cst.CSTNode) -> "NameUses":
        uses = cls()
        for node in nodes:
            walk(node, uses)
        return uses

    def _bind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.writes.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)
        else:
            walk(target, self)  # `x[i] = ...`, `obj.attr = ...` read their base

    def visit_Name(self, node: cst.Name) -> None:
        self.reads.add(node.value)
        self.loaded.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._bind(node.target)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._bind(node.target)
        if node.value is not None:
            walk(node.value, self)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._bind(node.target)
        if isinstance(node.target, cst.Name):
            self.reads.add(node.target.value)
        walk(node.value, self)
        return False

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._bind(node.name)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self._bind(node.target)
        walk(node.value, self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.writes.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.writes.add(node.name.value)
        return False
