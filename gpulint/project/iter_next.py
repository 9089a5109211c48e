"""`.next()` on a DataLoader's iterator: code that runs only on torch 1.12 or older.

torch's DataLoader iterators (`_SingleProcessDataLoaderIter`, `_MultiProcessingDataLoaderIter`) kept a Python 2
alias, `next = __next__`, until torch 1.13 removed it (reported as pytorch#87955): from 1.13 on, `iter(loader).next()`
raises AttributeError ("'_SingleProcessDataLoaderIter' object has no attribute 'next'"). Code that calls it runs
only on torch 1.12 or older (`NEXT_CEILING`), a torch ceiling like those of project/facts.py (`torch_ceiling`).

The evidence is read precisely, from CPython's `ast` (project/facts.py's layer): the receiver of `.next()` is an
iterator made by the builtin `iter(<x>)` (`iter(loader).next()`, or a name or `self.<attribute>` every binding
of which is such a call), and `<x>` is a torch DataLoader: a `DataLoader(...)` call (through the file's imports),
or a name, a tuple element, a `self.<attribute>`, a parameter (every call of its top-level function in the file
hands one; a function that is referenced otherwise has callers unknown) or the result of a top-level function of
the file, each bound only to such values, or what an imported function returns (an origin `CALL`, which the project
view resolves against FileFacts.loader_functions of the module that defines it). Anything else is unknown, never
evidence: a user's class with its own `next` method, a generator, `next(it)`, `it.__next__()`. A `.next()` in the
body of a `try` that catches AttributeError (or any exception), or under an `if` that tests a version or calls
`hasattr`, may be a fallback for another torch and is not evidence either.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Union

from gpulint.project.ast_nodes import code_children, fast_walk
from gpulint.project.loader_flow import dotted as _dotted
from gpulint.project.loader_flow import parameter_names

# DataLoader iterators lost their Python 2 `next` alias in torch 1.13 (pytorch#87955)
NEXT_CEILING = (1, 13)
LOADER = "DataLoader"  # an origin: a torch DataLoader the file builds
CALL = "call:"  # an origin: what an imported function returns, "call:<callee as spelled>" or "...[<tuple slot>]"

_DEPTH = 8
_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef]
_Values = Optional[list[tuple[ast.expr, Optional[int], "_Scope"]]]  # (value, tuple slot, scope); None: unknown
_CATCHES = frozenset({"AttributeError", "Exception", "BaseException"})


class _File:
    """The bindings of one module, read lazily: what a name, a `self.<attribute>` or a parameter may hold."""

    def __init__(self, tree: ast.Module, is_loader: Callable[[ast.expr], bool], imported: frozenset[str]) -> None:
        self.tree = tree
        self.is_loader = is_loader
        self.imported = imported  # local names the module's imports bind
        self.functions: dict[str, _Function] = {}
        self.classes: dict[int, ast.ClassDef] = {}  # method -> its module-level class
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                for member in statement.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.classes[id(member)] = statement
        self._owned: dict[int, list[ast.AST]] = {}
        self._bindings: dict[int, dict[str, _Values]] = {}
        self._attributes: dict[int, dict[str, _Values]] = {}
        self._owners: Optional[dict[int, _Scope]] = None
        self._calls: Optional[dict[str, Optional[list[ast.Call]]]] = None

    def owned(self, scope: ast.AST) -> list[ast.AST]:
        """The nodes of `scope` outside the functions it defines (a class body is its scope's)."""
        found = self._owned.get(id(scope))
        if found is None:
            found = []
            stack: list[ast.AST] = list(scope.body)  # type: ignore[attr-defined]
            definitions = (ast.FunctionDef, ast.AsyncFunctionDef)
            while stack:
                node = stack.pop()
                if type(node) in definitions:
                    stack.extend(node.decorator_list)  # type: ignore[attr-defined]
                    continue
                found.append(node)
                stack.extend(code_children(node))  # (an expression context is read as `ctx`, never as a node)
            self._owned[id(scope)] = found
        return found

    def owners(self) -> dict[int, _Scope]:
        """Each node's scope (the module, or the innermost function)."""
        if self._owners is None:
            self._owners = {}
            scopes: list[_Scope] = [self.tree]
            scopes += [n for n in fast_walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for scope in scopes:
                for node in self.owned(scope):
                    self._owners[id(node)] = scope
        return self._owners

    def bindings(self, scope: _Scope) -> dict[str, _Values]:
        """name -> the values the scope binds it to; None where some binding is not a plain assignment."""
        found = self._bindings.get(id(scope))
        if found is not None:
            return found
        lists: dict[str, list[tuple[ast.expr, Optional[int], _Scope]]] = {}
        plain: set[int] = set()  # the Name targets read here
        for node in self.owned(scope):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name, value, slot in _unpacked(target, node.value):
                        lists.setdefault(name.id, []).append((value, slot, scope))  # type: ignore[attr-defined]
                        plain.add(id(name))
        found = dict(lists)
        for node in self.owned(scope):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in plain:
                found[node.id] = None  # a loop variable, `with ... as`, `+=`, `del`, a nested tuple
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                found.update(dict.fromkeys(node.names))
            elif isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef)):
                names = [a.asname or a.name.split(".")[0] for a in node.names] \
                    if not isinstance(node, ast.ClassDef) else [node.name]
                found.update(dict.fromkeys(names))
        if not isinstance(scope, ast.Module):
            for statement in scope.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[statement.name] = None
        self._bindings[id(scope)] = found
        return found

    def attributes(self, cls: ast.ClassDef) -> dict[str, _Values]:
        """attribute -> the values the class's methods bind `self.<attribute>` to (None: some other way)."""
        found = self._attributes.get(id(cls))
        if found is not None:
            return found
        lists: dict[str, list[tuple[ast.expr, Optional[int], _Scope]]] = {}
        plain: set[int] = set()  # the attribute targets read here
        methods = [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for method in methods:
            for node in self.owned(method):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for attribute, value, slot in _unpacked(target, node.value, attributes=True):
                            lists.setdefault(attribute.attr, []).append(  # type: ignore[attr-defined]
                                (value, slot, method))
                            plain.add(id(attribute))
        found = dict(lists)
        for method in methods:
            for node in self.owned(method):
                if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and id(node) not in plain \
                        and isinstance(node.value, ast.Name) and node.value.id == "self":
                    found[node.attr] = None  # `self.x += ...`, a loop target, `del self.x`
        self._attributes[id(cls)] = found
        return found

    def calls(self, name: str) -> Optional[list[ast.Call]]:
        """The calls `name(...)` of the module, or None where it is read otherwise (handed on, rebound)."""
        if self._calls is None:
            called: set[int] = set()
            self._calls = {}
            nodes = list(fast_walk(self.tree))
            for node in nodes:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions:
                    called.add(id(node.func))
                    found = self._calls.setdefault(node.func.id, [])
                    if found is not None:
                        found.append(node)
            for node in nodes:
                if isinstance(node, ast.Name) and node.id in self.functions and id(node) not in called:
                    self._calls[node.id] = None
        return self._calls.get(name, [])

    def name_values(self, name: str, scope: _Scope) -> _Values:
        """What `name`, read in `scope`, may hold; None when unknown."""
        bound = self.bindings(scope)
        if isinstance(scope, ast.Module):
            return bound.get(name)
        if id(scope) not in self.classes and self.functions.get(scope.name) is not scope:
            return None  # a nested function: its free names may be its enclosing function's
        parameters = parameter_names(scope)
        if name in parameters:
            handed = self.handed(scope, name)
            own = bound.get(name, []) if name in bound else []
            return None if handed is None or own is None else handed + own
        if name in bound:
            return bound[name]
        return self.name_values(name, self.tree)

    def handed(self, function: _Function, name: str) -> _Values:
        """What every call of the module-level `function` hands its parameter `name` (None: unknown)."""
        if id(function) in self.classes or self.functions.get(function.name) is not function:
            return None
        calls = self.calls(function.name)
        if not calls:
            return None
        arguments = function.args
        positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
        owners = self.owners()
        out: list[tuple[ast.expr, Optional[int], _Scope]] = []
        for call in calls:
            value = next((k.value for k in call.keywords if k.arg == name), None)
            if value is None and name in positional:
                index = positional.index(name)
                before = call.args[:index + 1]
                if any(isinstance(a, ast.Starred) for a in before) or index >= len(call.args):
                    return None
                value = call.args[index]
            owner = owners.get(id(call))
            if value is None or owner is None:
                return None
            out.append((value, None, owner))
        return out

    def origins(self, expr: ast.expr, scope: _Scope, slot: Optional[int] = None,
                depth: int = 0) -> Optional[frozenset[str]]:
        """Where the loader `expr` (element `slot` of it) comes from (`LOADER`, `CALL...`); None: unknown."""
        if depth > _DEPTH:
            return None
        if isinstance(expr, ast.Call):
            func = expr.func
            if self.is_loader(func):
                return frozenset({LOADER}) if slot is None else None
            if isinstance(func, ast.Name) and func.id in self.functions and func.id not in self.bindings(self.tree):
                return self.returns(self.functions[func.id], slot, depth + 1)
            spelled = _dotted(func)
            if spelled is not None and spelled.split(".", 1)[0] in self.imported:
                return frozenset({CALL + spelled + ("" if slot is None else f"[{slot}]")})
            return None
        if isinstance(expr, (ast.Tuple, ast.List)):
            if slot is None or slot >= len(expr.elts) or any(isinstance(e, ast.Starred) for e in expr.elts):
                return None
            return self.origins(expr.elts[slot], scope, None, depth + 1)
        if isinstance(expr, ast.Subscript) and slot is None and isinstance(expr.slice, ast.Constant) \
                and type(expr.slice.value) is int and expr.slice.value >= 0:
            return self.origins(expr.value, scope, expr.slice.value, depth + 1)
        values = self.values(expr, scope)
        if not values:
            return None
        out: set[str] = set()
        for value, bound_slot, owner in values:
            if bound_slot is not None and slot is not None:
                return None  # an element of an element: not followed
            found = self.origins(value, owner, slot if bound_slot is None else bound_slot, depth + 1)
            if found is None:
                return None
            out |= found
        return frozenset(out)

    def values(self, expr: ast.expr, scope: _Scope) -> _Values:
        """The values a name or `self.<attribute>` read in `scope` may hold."""
        if isinstance(expr, ast.Name):
            return self.name_values(expr.id, scope)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self" \
                and id(scope) in self.classes:
            return self.attributes(self.classes[id(scope)]).get(expr.attr)
        return None

    def returns(self, function: _Function, slot: Optional[int], depth: int) -> Optional[frozenset[str]]:
        """The origins of what every `return` of `function` gives (None: one is unknown, or none returns)."""
        out: set[str] = set()
        found = False
        for node in self.owned(function):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(node, ast.Return):
                if node.value is None:
                    return None
                origins = self.origins(node.value, function, slot, depth)
                if origins is None:
                    return None
                out |= origins
                found = True
        return frozenset(out) if found else None


def _unpacked(target: ast.expr, value: ast.expr,
              attributes: bool = False) -> list[tuple[ast.expr, ast.expr, Optional[int]]]:
    """(target, value, slot) for each name (or `self.<attribute>`) `target = value` binds: a tuple target takes
    the matching element of a tuple value, else the element `slot` of the value."""
    def wanted(node: ast.expr) -> bool:
        if attributes:
            return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        return isinstance(node, ast.Name)

    if wanted(target):
        return [(target, value, None)]
    if not isinstance(target, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in target.elts):
        return []
    elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
        and not any(isinstance(e, ast.Starred) for e in value.elts) else None
    return [(element, elements[i], None) if elements is not None else (element, value, i)
            for i, element in enumerate(target.elts) if wanted(element)]


def _guarded(tree: ast.Module) -> set[int]:
    """Nodes that may be a fallback for another torch: the body of a `try` that catches AttributeError (or
    any exception), and what an `if` testing a version or calling `hasattr` holds."""
    out: set[int] = set()
    for node in fast_walk(tree):
        if isinstance(node, ast.Try) and any(_catches(h) for h in node.handlers):
            out.update(id(n) for statement in node.body for n in fast_walk(statement))
        elif isinstance(node, ast.If) and any(
                (isinstance(n, ast.Name) and ("version" in n.id.lower() or n.id == "hasattr"))
                or (isinstance(n, ast.Attribute) and "version" in n.attr.lower()) for n in fast_walk(node.test)):
            out.update(id(n) for n in fast_walk(node))
    return out


def _catches(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:
        return True
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(_dotted(n) in _CATCHES for n in names)


def next_origins(tree: ast.Module, calls: list[ast.Call], is_loader: Callable[[ast.expr], bool],
                 imported: frozenset[str]) -> tuple[tuple[str, ...], ...]:
    """For each `<iterator>.next()` of `calls` (the module's `.next()` calls without arguments) whose iterator
    is `iter(<x>)` with `<x>` a loader as far as the module tells, the origins of `<x>` (sorted; `LOADER`, or
    `CALL...` for the project view to resolve); the sets found, sorted, each once."""
    if "iter" in {n.id for n in fast_walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} \
            or any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.name == "iter"
                   for s in tree.body):
        return ()  # `iter` is not the builtin
    file = _File(tree, is_loader, imported)
    guarded = _guarded(tree)
    owners = file.owners()
    found: set[tuple[str, ...]] = set()
    for call in calls:
        if id(call) in guarded:
            continue
        scope = owners.get(id(call))
        receiver = call.func.value  # type: ignore[attr-defined]
        if scope is None:
            continue
        iterators: _Values = [(receiver, None, scope)] if isinstance(receiver, ast.Call) \
            else file.values(receiver, scope)
        if not iterators:
            continue
        origins: set[str] = set()
        for value, slot, owner in iterators:
            if slot is not None or not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                        and value.func.id == "iter" and len(value.args) == 1 and not value.keywords):
                break
            sources = file.origins(value.args[0], owner)
            if sources is None:
                break
            origins |= sources
        else:
            found.add(tuple(sorted(origins)))
    return tuple(sorted(found))


def loader_functions(tree: ast.Module, lines: list[int], is_loader: Callable[[ast.expr], bool],
                     returns: Optional[list[int]] = None) -> tuple[str, ...]:
    """The module-level functions that return a torch DataLoader the module builds ("f"), or one in each
    return's element `i` ("f[i]"); only functions whose lines hold a `DataLoader` call (`lines`) and, when
    `returns` lists the lines of the module's `return <value>` statements, one of those are read (most loaders
    are built in a `main` that returns nothing)."""
    candidates = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and any(s.lineno <= line <= (s.end_lineno or s.lineno) for line in lines)
                  and (returns is None or any(s.lineno <= line <= (s.end_lineno or s.lineno) for line in returns))]
    if not candidates:
        return ()
    file = _File(tree, is_loader, frozenset())
    out: list[str] = []
    loader = frozenset({LOADER})
    for function in candidates:
        if file.returns(function, None, 0) == loader:
            out.append(function.name)
            continue
        widths = {len(n.value.elts) for n in file.owned(function) if isinstance(n, ast.Return)
                  and isinstance(n.value, (ast.Tuple, ast.List))}
        if len(widths) == 1:
            out.extend(f"{function.name}[{i}]" for i in range(widths.pop()) if file.returns(function, i, 0) == loader)
    return tuple(out)
