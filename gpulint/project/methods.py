"""Private methods nothing calls: a `_select_optimizer` kept in a class that only evaluates.

A method whose name starts with one underscore is private by convention: its own class, a subclass or
code of its module calls it, through an attribute on some receiver (`self._select_optimizer()`), or by
its name as a string (`getattr(self, "_select_optimizer")`, a registry). When nothing in the module names
it, no class of the module derives from its class, and the class's bases are followed to `object`
through classes the project defines (a library base such as `nn.Module` or a trainer may call hooks by
name), only another project file may still call it. The file's facts hold these candidates
(`uncalled_methods`), the classes whose bases can be followed (`plain_classes`), and the private names
every file reads as attributes or spells as strings (`private_attributes`, `private_strings`); the
project view (project/view.py `ProjectView.uncalled_methods`) keeps the candidates that no module
importing the file, or imported by it, names.

Read from CPython's `ast` (project/facts.py's layer). Seen in blind10: Time-Series-Library's zero-shot
experiment class copies `_select_optimizer` from its training siblings but only ever tests.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional, Union

from gpulint.project.ast_nodes import fast_walk

# calls that reach functions by a name computed at run time: every function of the file may run
DYNAMIC_CALLS = frozenset({"Fire", "CLI", "import_module", "__import__", "run_module", "run_path"})
# builtins that dispatch by a computed name when called bare (`model.eval()` is torch's, not `eval`)
DYNAMIC_BUILTINS = frozenset({"globals", "locals", "vars", "eval", "exec"})
# calls that reach a method by a name they are handed, or list an object's methods to call them by name:
# with a name computed at run time any private method of the file may run
_BY_NAME = frozenset({"getattr", "methodcaller", "attrgetter"})
_LISTING = frozenset({"dir", "getmembers"})
# bases and metaclasses that call no method of a subclass by name
_INERT_BASES = frozenset({"abc.ABC"})
_INERT_METACLASSES = frozenset({"abc.ABCMeta"})
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def is_private(name: str) -> bool:
    """One leading underscore, and not a hook spelled `_name_` (`_repr_html_`, Enum's `_missing_`), which
    a library calls by name."""
    return len(name) > 1 and name[0] == "_" and name[1] != "_" and not name.endswith("_")


def mentions_name(name: str) -> bool:
    """A name `private_attributes` and `private_strings` keep: one a private method may be called by, or
    for a string a prefix of one ("_select_", which code completes at run time)."""
    return len(name) > 1 and name[0] == "_" and name[1] != "_"


def named_by(name: str, strings: Iterable[str]) -> bool:
    """`strings` (the ones a file spells) may reach the method `name`: it is among them, or one of them (two
    characters or more) begins it, as `getattr(self, "_select_" + kind)` would."""
    return any(len(s) > 1 and name.startswith(s) for s in strings)


def plain_classes(tree: ast.Module, qualified: Callable[[ast.AST], set[str]],
                  from_names: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The module-level classes whose bases can be followed to `object`: class -> the names `from` imports
    bind among its bases and those of its bases in the file (the project view follows them into the modules
    they come from). Each base is `object`, `ABC`, a class of the file (defined once) or a name a `from`
    import binds; a class with any other base (`nn.Module` spelled through its module, a subscripted
    `Generic[T]`, a call) or a metaclass other than ABCMeta is absent. `qualified`: the names an expression
    may stand for through the file's imports."""
    defined: dict[str, Optional[ast.ClassDef]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            defined[statement.name] = None if statement.name in defined else statement
    out: dict[str, tuple[str, ...]] = {}
    unknown: set[str] = set()

    def follow(name: str, visiting: frozenset[str]) -> Optional[tuple[str, ...]]:
        if name in out or name in unknown:
            return out.get(name)
        node = defined.get(name)
        if node is None or name in visiting:
            return None
        found: set[str] = set()
        plain = all(k.arg == "metaclass" and qualified(k.value) & _INERT_METACLASSES for k in node.keywords)
        for base in node.bases if plain else ():
            if isinstance(base, ast.Name) and base.id == "object" or qualified(base) & _INERT_BASES:
                continue
            inner = follow(base.id, visiting | {name}) if isinstance(base, ast.Name) and base.id in defined \
                else (base.id,) if isinstance(base, ast.Name) and base.id in from_names else None
            if inner is None:
                plain = False
                break
            found.update(inner)
        if not plain:
            unknown.add(name)
            return None
        out[name] = tuple(sorted(found))
        return out[name]

    for name in defined:
        follow(name, frozenset())
    return out


def uncalled_methods(tree: ast.Module, plain: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The private methods (`is_private`) of the file's plain module-level classes (`plain_classes`) that
    nothing in the file names: no attribute of that name on any receiver, no bare name, no string equal to
    it, to it without its underscore, or beginning it (`named_by`); undecorated or a static or class method;
    of a class no class of the file derives from. As "Class._name". Empty when the file reaches methods
    by a computed name (`getattr(self, name)`, `dir(self)`) or dispatches dynamically (`globals()`, `exec`)."""
    candidates: dict[str, list[str]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and statement.name in plain:
            for item in statement.body:
                if isinstance(item, _FUNCTIONS) and is_private(item.name) and all(
                        isinstance(d, ast.Name) and d.id in _PLAIN_DECORATORS for d in item.decorator_list):
                    candidates.setdefault(item.name, []).append(f"{statement.name}.{item.name}")
    if not candidates:
        return ()
    names: set[str] = set()
    strings: set[str] = set()
    derived: set[str] = set()  # every name a class of the file spells among its bases
    for node in fast_walk(tree):
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            names.add(node.attr)  # type: ignore[attr-defined]
            if node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":  # type: ignore[attr-defined]
                return ()
        elif kind is ast.Constant and type(node.value) is str:  # type: ignore[attr-defined]
            strings.add(node.value)  # type: ignore[attr-defined]
        elif kind is ast.Call and _by_computed_name(node):  # type: ignore[arg-type]
            return ()
        elif kind is ast.ClassDef:
            for base in node.bases:  # type: ignore[attr-defined]
                derived.update(n.id if isinstance(n, ast.Name) else n.attr for n in fast_walk(base)
                               if isinstance(n, (ast.Name, ast.Attribute)))
    out: list[str] = []
    for name, keys in candidates.items():
        if name in names or name[1:] in strings or named_by(name, strings):
            continue
        out.extend(key for key in keys if key.partition(".")[0] not in derived)
    return tuple(sorted(out))


def _by_computed_name(call: ast.Call) -> bool:
    """The call may reach a method by a name computed at run time, or dispatches dynamically."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in DYNAMIC_CALLS or (isinstance(func, ast.Name) and name in DYNAMIC_BUILTINS) or name in _LISTING:
        return True
    if name in _BY_NAME:
        spelled = call.args[1] if name == "getattr" and len(call.args) > 1 else call.args[0] if name != "getattr" \
            and call.args else None
        return spelled is None or not (isinstance(spelled, ast.Constant) and type(spelled.value) is str)
    return False


# --------------------------------------------------------------------------------------------------
# modules a class's `__init__` moves to a device (GPU201's built-on-device through a base class)

_DEVICE_CONSTRUCTOR = "torch.device"


def init_moves(tree: ast.Module, qualified: Callable[[ast.AST], set[str]],
               plain: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The attributes of `self` each plain module-level class (`plain_classes`) moves to a device in its
    `__init__`, as "<attr>:<device>:<method>": `self.model = self._build_model().to(self.device)` at the top
    level of `__init__` (no condition, loop or `try` around it), the only binding of `self.model` anywhere in
    the class, where `self.device` is bound only once in the class, earlier at that level, to a `torch.device(...)`
    call or to `self.<method>()` of a method of the class whose every return is one (or a local name bound only to
    such calls in it) and whose last statement returns; "<attr>::" for `.cuda(...)`, always on CUDA. A subclass
    (which runs this `__init__` and binds neither attribute, nor overrides `<method>`) then holds its model on that
    device in any other method: before torch 2.4 `fused=self.device.type == "cuda"` is exactly where the
    parameters are on CUDA (blind25: iTransformer's Exp_Basic, whose subclasses build Adam in
    `_select_optimizer`)."""
    out: dict[str, tuple[str, ...]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or cls.name not in plain:
            continue
        found = _class_init_moves(cls, qualified)
        if found:
            out[cls.name] = found
    return out


def _class_init_moves(cls: ast.ClassDef, qualified: Callable[[ast.AST], set[str]]) -> tuple[str, ...]:
    methods: dict[str, list[Union[ast.FunctionDef, ast.AsyncFunctionDef]]] = {}
    for item in cls.body:
        if isinstance(item, _FUNCTIONS):
            methods.setdefault(item.name, []).append(item)
    inits = methods.get("__init__", [])
    if len(inits) != 1 or inits[0].decorator_list or not inits[0].args.args:
        return ()
    init = inits[0]
    this = init.args.args[0].arg
    if not any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
               and s.value.func.attr in ("to", "cuda") for s in init.body):
        return ()  # no move at the top of __init__ (most classes): the class is not walked
    bound: dict[str, int] = {}  # attribute of the instance -> how many statements of the class bind it
    for node in fast_walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "vars"):
            return ()  # attributes set by name
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) \
                and isinstance(node.value, ast.Name):
            bound[node.attr] = bound.get(node.attr, 0) + 1
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return ()
    devices: dict[str, str] = {}  # `self.<device>` bound at the top of __init__ -> the method that returned it
    out: list[str] = []
    for statement in init.body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target = statement.targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == this and bound.get(target.attr) == 1):
            continue
        value = statement.value
        source = _device_source(value, this, methods, qualified)
        if source is not None:
            devices[target.attr] = source
            continue
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
            continue
        if value.func.attr == "cuda" and not value.keywords:
            out.append(f"{target.attr}::")
        elif value.func.attr == "to" and len(value.args) == 1 and not value.keywords:
            device = value.args[0]
            if isinstance(device, ast.Attribute) and isinstance(device.value, ast.Name) \
                    and device.value.id == this and device.attr in devices:
                out.append(f"{target.attr}:{device.attr}:{devices[device.attr]}")
    return tuple(sorted(out))


def _device_source(value: ast.expr, this: str, methods: dict[str, list[Union[ast.FunctionDef, ast.AsyncFunctionDef]]],
                   qualified: Callable[[ast.AST], set[str]]) -> Optional[str]:
    """"" for a `torch.device(...)` call, the method's name for `self.<method>()` of a method returning only
    such devices (`_returns_devices`), None otherwise."""
    if not isinstance(value, ast.Call):
        return None
    if _DEVICE_CONSTRUCTOR in qualified(value.func):
        return ""
    func = value.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == this
            and not value.args and not value.keywords):
        return None
    defined = methods.get(func.attr, [])
    if len(defined) != 1 or defined[0].decorator_list or not _returns_devices(defined[0], qualified):
        return None
    return func.attr


def _returns_devices(method: Union[ast.FunctionDef, ast.AsyncFunctionDef],
                     qualified: Callable[[ast.AST], set[str]]) -> bool:
    """Every `return` of the method (nested functions aside) gives a `torch.device(...)` call or a local name
    bound only to such calls, and its last statement is one: `device = torch.device('cuda:{}'.format(gpu))` or
    `torch.device('cpu')` by a flag, then `return device`."""
    if isinstance(method, ast.AsyncFunctionDef) or not method.body or not isinstance(method.body[-1], ast.Return):
        return False
    returns: list[ast.Return] = []
    values: dict[str, list[Optional[ast.expr]]] = {}
    pending: list[ast.AST] = list(method.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            returns.append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in fast_walk(target):
                    if isinstance(name, ast.Name):
                        values.setdefault(name.id, []).append(node.value if target is name else None)
            pending.append(node.value)
            continue
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            values.setdefault(node.id, []).append(None)  # a loop target, `with ... as`, a walrus, `del`, `x += 1`
        pending.extend(ast.iter_child_nodes(node))

    def device(expr: Optional[ast.expr]) -> bool:
        return isinstance(expr, ast.Call) and _DEVICE_CONSTRUCTOR in qualified(expr.func)

    def returned(expr: Optional[ast.expr]) -> bool:
        if isinstance(expr, ast.Name):
            bound = values.get(expr.id, [])
            return bool(bound) and all(device(v) for v in bound)
        return device(expr)
    return all(returned(r.value) for r in returns)
