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
from typing import Callable, Iterable, Optional

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
