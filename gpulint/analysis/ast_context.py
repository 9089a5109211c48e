"""What an `ast` detector may ask about one file (issue 25): names, keyword arguments, parents, spans.

Rules that override `Rule.detect` read the CPython `ast` tree the engine already parsed for its guard,
prefilter and project facts; LibCST is parsed only when a fix must be built (`Rule.build_fix`). This
module must not import LibCST: `check` of a file whose rules all run on `ast` never loads it.

Names resolve like `core/names.py` does on LibCST (scope by scope, a name also bound some other way
resolves to nothing, so a user's own `Adam` is never torch's), so a rule ported from LibCST finds the
same calls. The module-level import table is the project facts' own (`project/facts.py`,
`ImportAliases`): `AstNames.qualified` gives its permissive answer (every import a name may stand for).
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import field
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    TypeVar,
    Union,
)

from gpulint.analysis.evidence import Decision, undecided_note
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import REACHABLE_FROM_TORCH
from gpulint.project.ast_nodes import CODE_SCOPES, node_fields
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import ImportAliases, module_imports
from gpulint.records import dataclass

if TYPE_CHECKING:
    from gpulint.core.context import FileContext
    from gpulint.core.settings import Settings
    from gpulint.project.view import ProjectView

T = TypeVar("T")
FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]

LOCAL = None  # binding marker for anything that is not an import


class Reporting(Protocol):
    """What `AstContext.report` needs of the rule that reports (rules/base.py's Rule)."""

    code: ClassVar[str]
    name: ClassVar[str]
    in_tests: ClassVar[bool]
    in_test_functions: ClassVar[bool]


# ------------------------------------------------------------------------------------------------
# names
# ------------------------------------------------------------------------------------------------

@dataclass(eq=False)
class AstScope:
    node: ast.AST
    parent: Optional["AstScope"]
    is_class: bool = False
    # name -> qualified import targets, with LOCAL for non-import bindings
    bindings: dict[str, list[Optional[str]]] = field(default_factory=dict)
    # name -> values assigned to it with a plain `name = value` (None for other bindings)
    values: dict[str, list[Optional[ast.expr]]] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)

    def bind(self, name: str, target: Optional[str], value: Optional[ast.expr] = None) -> None:
        scope = self
        if name in self.globals_:
            while scope.parent is not None:
                scope = scope.parent
        scope.bindings.setdefault(name, []).append(target)
        scope.values.setdefault(name, []).append(value)

    def lookup(self, name: str) -> Optional["AstScope"]:
        """The scope whose binding of `name` is visible here (Python's LEGB, classes skipped)."""
        scope: Optional[AstScope] = self
        first = True
        while scope is not None:
            if (first or not scope.is_class) and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None


def dotted(expr: ast.AST) -> Optional[str]:
    """`self.opt` / `torch.optim` for an attribute chain over a name, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


_NAME, _CONSTANT = ast.Name, ast.Constant


class _Binder:
    """One pass over the module: scopes, bindings, and the scope of every Name (as core/names.py)."""

    def __init__(self, names: "AstNames") -> None:
        self.names = names
        self.stack: list[AstScope] = [names.module_scope]
        self._dispatch: dict[type, Optional[Callable[[Any], Optional[bool]]]] = {}

    @property
    def scope(self) -> AstScope:
        return self.stack[-1]

    def walk(self, node: Optional[ast.AST]) -> None:
        if node is None:
            return
        kind = type(node)
        if kind is _NAME:  # a third of the nodes: its scope noted here, without a method call (no children)
            self.names.scope_of[id(node)] = self.stack[-1]
            return
        if kind is _CONSTANT:  # nothing to bind, no children
            return
        method = self._dispatch.get(kind)
        if method is None and kind not in self._dispatch:
            method = self._dispatch[kind] = getattr(self, "visit_" + kind.__name__, None)
        if method is not None and method(node) is False:
            return
        fields = _WALKED_FIELDS.get(kind)
        if fields is None:
            fields = _walked_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if item is not None:  # (a node: ast_nodes.HOLES)
                        self.walk(item)
            elif value is not None:
                self.walk(value)

    def walk_all(self, nodes: Iterable[Optional[ast.AST]]) -> None:
        for node in nodes:
            self.walk(node)

    def _push(self, node: ast.AST, is_class: bool = False) -> None:
        scope = AstScope(node=node, parent=self.scope, is_class=is_class)
        self.names.scopes[id(node)] = scope
        self.stack.append(scope)

    def _params(self, args: ast.arguments) -> list[ast.arg]:
        out = list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
        if args.vararg is not None:
            out.append(args.vararg)
        if args.kwarg is not None:
            out.append(args.kwarg)
        return out

    def _outer_params(self, args: ast.arguments, annotations: bool = True) -> None:
        """Defaults and annotations run in the enclosing scope."""
        self.walk_all(args.defaults)
        self.walk_all(d for d in args.kw_defaults if d is not None)
        if annotations:
            self.walk_all(p.annotation for p in self._params(args))

    def visit_FunctionDef(self, node: FunctionNode) -> bool:
        self.scope.bind(node.name, LOCAL)
        self.walk_all(node.decorator_list)
        self._outer_params(node.args)
        self.walk(node.returns)
        self._push(node)
        for param in self._params(node.args):
            self.scope.bind(param.arg, LOCAL)
        self.walk_all(node.body)
        self.stack.pop()
        return False

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> bool:
        self._outer_params(node.args, annotations=False)
        self._push(node)
        for param in self._params(node.args):
            self.scope.bind(param.arg, LOCAL)
        self.walk(node.body)
        self.stack.pop()
        return False

    def visit_ClassDef(self, node: ast.ClassDef) -> bool:
        self.scope.bind(node.name, LOCAL)
        self.walk_all(node.decorator_list)
        self.walk_all(node.bases)
        self.walk_all(node.keywords)
        self._push(node, is_class=True)
        self.walk_all(node.body)
        self.stack.pop()
        return False

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals_.update(node.names)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.scope.bind(alias.asname, alias.name)
            else:
                top = alias.name.split(".")[0]
                self.scope.bind(top, top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # a relative import keeps its dots (`from .data import X` -> ".data.X"), as core/names.py does
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                return
            target = (f"{module}.{alias.name}" if node.module else f"{module}{alias.name}") if module else LOCAL
            self.scope.bind(alias.asname or alias.name, target)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind_target(target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._bind_target(node.target, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind_target(node.target, None)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind_target(node.target, node.value)

    def visit_For(self, node: Union[ast.For, ast.AsyncFor]) -> None:
        self._bind_target(node.target, None)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._bind_target(node.target, None)

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._bind_target(node.optional_vars, None)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name is not None:
            self.scope.bind(node.name, LOCAL)

    def visit_Delete(self, node: ast.Delete) -> bool:
        return False  # `del x` after its last use changes no value the rules read

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            self.names.note_mutation(self.scope, func.value.id, node)

    def _bind_target(self, target: ast.expr, value: Optional[ast.expr]) -> None:
        if isinstance(target, ast.Name):
            self.scope.bind(target.id, LOCAL, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind_target(element, None)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.names.note_mutation(self.scope, target.value.id, target)


class AstNames:
    """Scopes and bindings of one module, and qualified-name resolution over them (issue 25's one
    alias table on `ast`; its module-level imports are the project facts' `ImportAliases`)."""

    def __init__(self, tree: ast.Module, star: Optional[Mapping[str, str]] = None) -> None:
        self.module_scope = AstScope(node=tree, parent=None)
        self._star = star or {}  # names only a `from project_module import *` binds (project/view.py)
        self.scopes: dict[int, AstScope] = {id(tree): self.module_scope}
        self.scope_of: dict[int, AstScope] = {}
        self._mutations: list[tuple[AstScope, str, ast.AST]] = []
        self._tree = tree
        self._imports: Optional[ImportAliases] = None
        _Binder(self).walk_all(tree.body)

    def note_mutation(self, scope: AstScope, name: str, node: ast.AST) -> None:
        # `kw.update(...)`, `kw["k"] = v`: matched to a binding once all bindings are known
        self._mutations.append((scope, name, node))

    def mutations_of(self, owner: AstScope, name: str) -> list[ast.AST]:
        """Method calls and subscript stores on the binding of `name` owned by `owner`."""
        return [node for scope, n, node in self._mutations if n == name and scope.lookup(name) is owner]

    def binding_scope(self, node: ast.Name) -> Optional[AstScope]:
        scope = self.scope_of.get(id(node))
        return scope.lookup(node.id) if scope is not None else None

    def resolve_name(self, node: ast.Name) -> Optional[str]:
        owner = self.binding_scope(node)
        if owner is None:
            return self._star.get(node.id) if id(node) in self.scope_of else None
        targets = owner.bindings[node.id]
        if LOCAL in targets or len(set(targets)) != 1:
            return None
        return targets[0]

    def qualname(self, expr: ast.AST) -> Optional[str]:
        """`torch.optim.Adam` for `optim.Adam` after `import torch.optim as optim`; None when the name is
        bound by anything but an import (a user's own `Adam`) or its imports disagree."""
        if isinstance(expr, ast.Name):
            return self.resolve_name(expr)
        if isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def is_(self, expr: ast.AST, *qualnames: str) -> bool:
        name = self.qualname(expr)
        return name is not None and name in qualnames

    def alias_for(self, qualname: str) -> Optional[str]:
        """How this file spells `qualname` through its module-level imports (`F.relu` for
        `torch.nn.functional.relu` after `import torch.nn.functional as F`), else None."""
        best: Optional[tuple[str, str]] = None
        for local, targets in self.module_scope.bindings.items():
            if LOCAL in targets or len(set(targets)) != 1:
                continue
            target = targets[0]
            assert target is not None
            if qualname == target or qualname.startswith(target + "."):
                if best is None or len(target) > len(best[1]):
                    best = (local, target)
        if best is None:
            return None
        local, target = best
        return local + qualname[len(target):]

    def module_alias(self, module: str) -> str:
        """The name under which a fix refers to `module`: the file's own import of it, else the name the
        import a fix adds binds (core/pending.py ImportPlanner.module_alias decides the same on LibCST)."""
        for alias, targets in self.module_scope.bindings.items():
            if len(set(targets)) == 1 and targets[0] == module:
                return alias
        taken: set[str] = set()
        for scope in self.scopes.values():
            taken.update(scope.bindings)
        if module.split(".")[0] not in taken:
            return module
        alias = module.replace(".", "_") + "_"
        while alias in taken:
            alias += "_"
        return alias

    def reference(self, module: str, name: str) -> str:
        """How a fix spells `module.name`: the file's own name for it, or through its import of the module
        (or of `torch`, for a submodule `import torch` reaches), else the name the import a fix adds binds
        (core/pending.py ImportPlanner.reference decides the same on LibCST)."""
        qualified = f"{module}.{name}"
        bound = {alias: targets[0] if len(set(targets)) == 1 and LOCAL not in targets else None
                 for alias, targets in self.module_scope.bindings.items()}
        for alias, target in bound.items():
            if target == qualified:
                return alias
        best: Optional[tuple[str, str]] = None
        for alias, target in bound.items():
            if target is None:
                continue
            if module == target or (module.startswith(target + ".") and target == "torch"
                                    and module.startswith(REACHABLE_FROM_TORCH)):
                if best is None or len(target) > len(best[1]):
                    best = (alias, target)
        if best is not None:
            alias, target = best
            return alias + module[len(target):] + "." + name
        taken: set[str] = set()
        for scope in self.scopes.values():
            taken.update(scope.bindings)
        if module.split(".")[0] not in taken:
            return qualified
        alias = name
        while alias in taken:
            alias = f"{module.split('.')[-1]}_{alias}"
        return alias

    @property
    def imports(self) -> ImportAliases:
        """The module-level import table the project facts use (permissive: every import a name may
        stand for, other bindings ignored)."""
        if self._imports is None:
            self._imports = ImportAliases(module_imports(self._tree))
        return self._imports

    def qualified(self, node: ast.AST) -> set[str]:
        """The project facts' answer: every qualified name a dotted chain may stand for."""
        return self.imports.qualified(node)


# ------------------------------------------------------------------------------------------------
# keyword arguments
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AstKeywordArgs:
    """The keywords a call passes, looking through `**d` dicts visible in the file.

    `explicit` maps each keyword known to be passed to its value expression (None: passed, but its
    value is not visible, e.g. set with `d["k"] = ...`). `unknown` is True when a `**x` cannot be seen
    through: any other keyword might be set too."""

    explicit: dict[str, Optional[ast.expr]]
    unknown: bool
    from_splat: frozenset[str] = frozenset()  # keys that come from a `**dict`, not from the call itself

    def has(self, name: str) -> bool:
        """Passed, or possibly passed (a `**x` hides some keys)."""
        return name in self.explicit or self.unknown

    def passed(self, name: str) -> bool:
        """Known to be passed (as `KeywordArgs.has` on LibCST)."""
        return name in self.explicit

    def get(self, name: str) -> Optional[ast.expr]:
        return self.explicit.get(name)

    @property
    def complete(self) -> bool:
        return not self.unknown


def _string(node: Optional[ast.AST]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


_Keys = Optional[dict[str, Optional[ast.expr]]]


def _dict_keys(expr: ast.AST, names: AstNames, depth: int = 0) -> _Keys:
    """Keys of a dict literal or `dict(k=v)` call, also through `**other` dicts visible in the file;
    None when not fully known."""
    if depth > 4:
        return None
    if isinstance(expr, ast.Dict):
        out: dict[str, Optional[ast.expr]] = {}
        for key_node, value in zip(expr.keys, expr.values):
            if key_node is None:  # `{**base, "lr": lr}`
                inner = _splat_keys(value, names, depth)
                if inner is None:
                    return None
                out.update(inner)
                continue
            key = _string(key_node)
            if key is None:
                return None
            out[key] = value
        return out
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        if names.binding_scope(expr.func) is not None:
            return None  # a user's own `dict`
        out = {}
        for arg in expr.args:
            if isinstance(arg, ast.Starred):
                return None
            inner = _splat_keys(arg, names, depth)  # `dict(base, lr=lr)`
            if inner is None:
                return None
            out.update(inner)
        for keyword in expr.keywords:
            if keyword.arg is None:  # `dict(**base, lr=lr)`
                inner = _splat_keys(keyword.value, names, depth)
                if inner is None:
                    return None
                out.update(inner)
            else:
                out[keyword.arg] = keyword.value
        return out
    return None


def _splat_keys(expr: ast.AST, names: AstNames, depth: int) -> _Keys:
    if isinstance(expr, ast.Name):
        return visible_dict_keys(expr, names, depth + 1)
    return _dict_keys(expr, names, depth + 1)


def _mutation_keys(node: ast.AST, names: AstNames) -> _Keys:
    if isinstance(node, ast.Subscript):  # kw["key"] = value
        key = _string(node.slice)
        return {key: None} if key is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method == "update":
            if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
                return _dict_keys(node.args[0], names)
            if not node.args and all(k.arg is not None for k in node.keywords):
                return {k.arg: k.value for k in node.keywords if k.arg is not None}
            return None
        if method in {"get", "keys", "values", "items", "copy", "__contains__", "pop"}:
            return {}  # reads (and removals: `pop` adds no key) do not add keys
        if method == "setdefault" and node.args and _string(node.args[0]) is not None:
            return {_string(node.args[0]): None}  # type: ignore[dict-item]
        return None  # clear, popitem, ...: not tracked
    return None


def visible_dict_keys(name: ast.Name, names: AstNames, depth: int = 0) -> _Keys:
    """Keys of the dict bound to `name`, when every binding and change of it is visible. A key removed
    with `pop`/`del` may still be listed: a superset, never missing a key that is there."""
    owner = names.binding_scope(name)
    if owner is None:
        return None
    keys: dict[str, Optional[ast.expr]] = {}
    for target, value in zip(owner.bindings[name.id], owner.values[name.id]):
        if target is not None or value is None:
            return None
        found = _dict_keys(value, names, depth)
        if found is None:
            return None
        for key, val in found.items():
            keys[key] = val if key not in keys else None
    for node in names.mutations_of(owner, name.id):
        found = _mutation_keys(node, names)
        if found is None:
            return None
        for key in found:
            keys[key] = None
    return keys


def keyword_args(call: ast.Call, names: AstNames) -> AstKeywordArgs:
    values: dict[str, Optional[ast.expr]] = {}
    splat: set[str] = set()
    unknown = False
    for keyword in call.keywords:
        if keyword.arg is not None:
            values[keyword.arg] = keyword.value
            continue
        found: _Keys = None
        if isinstance(keyword.value, ast.Name):
            found = visible_dict_keys(keyword.value, names)
        elif isinstance(keyword.value, (ast.Dict, ast.Call)):
            found = _dict_keys(keyword.value, names)
        if found is None:
            unknown = True
        else:
            values.update(found)
            splat.update(found)
    return AstKeywordArgs(values, unknown, frozenset(splat))


def positional_args(call: ast.Call) -> Optional[list[ast.expr]]:
    """The positional arguments; None when a `*args` hides how many there are."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return list(call.args)


def arg(call: ast.Call, name: str, position: Optional[int], kwargs: AstKeywordArgs) -> Optional[ast.expr]:
    """The argument `name` of `call`, passed by keyword (also through a visible `**d`) or at
    `position` (0-based, from core/torch_api.py); None when not passed or not visible. A `*args`
    before `position` hides which argument lands there: None."""
    if name in kwargs.explicit:
        return kwargs.explicit[name]
    if position is None:
        return None
    for index, value in enumerate(call.args):
        if isinstance(value, ast.Starred):
            return None
        if index == position:
            return value
    return None


# ------------------------------------------------------------------------------------------------
# detections
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AstSpan:
    """A node's position as `ast` gives it: 1-based rows, UTF-8 byte columns (the engine converts
    them to character columns)."""

    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int

    @classmethod
    def of(cls, node: ast.AST) -> "AstSpan":
        return cls(node.lineno, node.col_offset,  # type: ignore[attr-defined]
                   getattr(node, "end_lineno", None) or node.lineno,  # type: ignore[attr-defined]
                   getattr(node, "end_col_offset", None) or node.col_offset)  # type: ignore[attr-defined]


# the note of a finding whose fix needs LibCST's tree where LibCST cannot parse the file
NO_LIBCST_NOTE = "no automatic fix here: gpulint cannot parse this file to edit it"


@dataclass(frozen=True)
class Detection:
    """What an `ast` detector reported; the engine turns it into a Finding (and, when edits are
    needed, finds the LibCST node at `span` and asks the rule's `build_fix`)."""

    code: str
    name: str
    span: AstSpan
    message: str
    fix: Optional[Applicability] = None  # predicted applicability of the fix build_fix builds
    fix_message: str = ""
    data: Optional[dict[str, Any]] = None
    note: str = ""
    statement_rows: tuple[int, int] = (0, 0)  # the rows a noqa comment may sit on (a block: its header)
    node_type: str = ""  # the `ast` node's class name, to find the matching LibCST node


# ------------------------------------------------------------------------------------------------
# the context
# ------------------------------------------------------------------------------------------------

# fields that hold operators and load/store contexts (shared singletons: not nodes of the file)
_SKIP_FIELDS = frozenset({"ctx", "op", "ops"})
_WALKED_FIELDS: dict[type, tuple[str, ...]] = {}  # a node type's fields but _SKIP_FIELDS, read once per type


def _walked_fields(kind: type) -> tuple[str, ...]:
    fields = _WALKED_FIELDS[kind] = tuple(name for name in node_fields(kind) if name not in _SKIP_FIELDS)
    return fields

_REORDER = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Dict, ast.IfExp})
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + \
            ((ast.Match,) if hasattr(ast, "Match") else ())


class AstContext:
    """Everything an `ast` detector may ask about one file; analyses are computed on first use."""

    def __init__(self, path: Path, text: str, tree: ast.Module, settings: "Settings",
                 project: "ProjectView", libcst_refusal: Optional[Callable[[str], object]] = None) -> None:
        self.path = path
        self.text = text
        self.tree = tree
        self.settings = settings
        self.project = project
        self.detections: list[Detection] = []
        self._names: Optional[AstNames] = None
        self._analyses: dict[Callable[..., Any], Any] = {}
        self._parents: Optional[dict[int, ast.AST]] = None
        self._index: Optional[dict[type, list[ast.AST]]] = None
        self._named: Optional[dict[str, list[ast.Name]]] = None
        self._order: dict[int, int] = {}  # preorder number of every node, for `nodes` of several types
        self._ends: dict[int, int] = {}  # the preorder number of a node's last descendant, asked per node
        self._code_scopes: dict[int, ast.AST] = {}
        self._bound: dict[str, dict[int, list[ast.Name]]] = {}
        self._qualnames: dict[int, Optional[str]] = {}  # by node id: the tree outlives the context
        self._lines: Optional[list[str]] = None
        self._starts: Optional[list[int]] = None
        self._libcst: Optional["FileContext"] = None
        self._libcst_tried = False
        # the engine's guard (engine/guard.py libcst_refusal): a reason not to parse the text with LibCST, or None
        self._libcst_refusal = libcst_refusal

    def libcst(self) -> Optional["FileContext"]:
        """The file on LibCST, parsed on first use, for the one fact of a prediction still read on LibCST
        (GPU001 in a file that uses Intel GPUs only: how the fix spells the device; it costs the parse this API
        exists to avoid). None where LibCST cannot parse the file or the engine's guard refuses it (valid
        Python LibCST rejects, a file too large or too deep for it)."""
        if not self._libcst_tried:
            self._libcst_tried = True
            if self._libcst_refusal is not None and self._libcst_refusal(self.text) is not None:
                return None
            import libcst as cst

            from gpulint.core.context import FileContext

            try:
                module = cst.parse_module(self.text)
            except (cst.ParserSyntaxError, RecursionError, SyntaxError, ValueError):
                return None
            self._libcst = FileContext(self.path, self.text, module, self.settings, self.project)
        return self._libcst

    # -- names and arguments ---------------------------------------------------------------------
    @property
    def names(self) -> AstNames:
        if self._names is None:
            self._names = AstNames(self.tree, self.project.star_modules)
        return self._names

    def qualname(self, expr: ast.AST) -> Optional[str]:
        """AstNames.qualname, remembered per node of the tree (every rule asks it of the same calls; a node an
        analysis builds for itself is not remembered: its id may be reused once it is freed)."""
        known = self._qualnames
        key = id(expr)
        if key in known:
            return known[key]
        found = self.names.qualname(expr)
        if key in self._order:
            known[key] = found
        return found

    def kwargs(self, call: ast.Call) -> AstKeywordArgs:
        return keyword_args(call, self.names)

    def analysis(self, compute: Callable[["AstContext"], T]) -> T:
        """Run a whole-file analysis once and share its result between rules."""
        if compute not in self._analyses:
            self._analyses[compute] = compute(self)
        return self._analyses[compute]

    # -- the tree --------------------------------------------------------------------------------
    def _build_index(self) -> None:
        """One pass: the preorder number, parent and kind of every node (operators and contexts left out)."""
        parents: dict[int, ast.AST] = {}
        index: dict[type, list[ast.AST]] = {}
        order = self._order
        stack: list[ast.AST] = [self.tree]
        push = stack.append
        number = 0
        while stack:
            node = stack.pop()
            order[id(node)] = number
            number += 1
            kind = type(node)
            found = index.get(kind)
            if found is None:
                index[kind] = [node]
            else:
                found.append(node)
            fields = _WALKED_FIELDS.get(kind)
            if fields is None:
                fields = _walked_fields(kind)
            if not fields:
                continue  # a name or a constant: no children
            if kind not in _REORDER:  # the children pushed last first, so that the first is popped next
                for name in reversed(fields):
                    value = getattr(node, name, None)
                    if value.__class__ is list:
                        for item in reversed(value):
                            if item is not None:  # (a node: ast_nodes.HOLES)
                                parents[id(item)] = node
                                push(item)
                    elif value is not None:
                        parents[id(value)] = node
                        push(value)
                continue
            children: list[ast.AST] = []
            for name in fields:
                value = getattr(node, name, None)
                if value.__class__ is list:
                    children.extend(item for item in value if item is not None)
                elif value is not None:
                    children.append(value)
            children = _source_order(node, children)
            for child in children:
                parents[id(child)] = node
            children.reverse()
            stack.extend(children)
        self._parents, self._index = parents, index

    def nodes(self, *types: type) -> Iterator[ast.AST]:
        """Every node of these types, in source order (parents before their children)."""
        if self._index is None:
            self._build_index()
        assert self._index is not None
        lists = [nodes for kind, nodes in self._index.items() if issubclass(kind, types)]
        if len(lists) == 1:
            yield from lists[0]
            return
        order = self._order
        yield from sorted((n for nodes in lists for n in nodes), key=lambda n: order[id(n)])

    def named(self, identifier: str) -> list[ast.Name]:
        """Every `Name` node spelling `identifier`, in source order (an index: a name's uses are asked per
        binding, and a long file has thousands of names)."""
        if self._named is None:
            named: dict[str, list[ast.Name]] = {}
            for node in self.nodes(ast.Name):
                assert isinstance(node, ast.Name)
                named.setdefault(node.id, []).append(node)
            self._named = named
        return self._named.get(identifier, [])

    def order(self, node: ast.AST) -> Optional[int]:
        """The node's number in preorder (source order), None for a node not in this tree."""
        if self._index is None:
            self._build_index()
        return self._order.get(id(node))

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        if self._parents is None:
            self._build_index()
        assert self._parents is not None
        return self._parents.get(id(node))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parent = self.parent(node)
        while parent is not None:
            yield parent
            parent = self.parent(parent)

    def _end(self, node: ast.AST) -> int:
        """The preorder number of the last node of `node`'s subtree (itself when it has no children)."""
        end = self._ends.get(id(node))
        if end is None:
            order = self._order
            current = node
            while True:  # the last node in preorder is the last child's last node, all the way down
                numbered = [child for child in ast.iter_child_nodes(current) if id(child) in order]
                if not numbered:
                    break
                current = max(numbered, key=lambda child: order[id(child)])
            end = self._ends[id(node)] = order[id(current)]
        return end

    def within(self, node: ast.AST, outer: ast.AST) -> bool:
        """`outer` is a proper ancestor of `node`: `any(a is outer for a in ancestors(node))` without the walk
        (one interval test on preorder numbers; a check asked per pair of calls in a long file was quadratic)."""
        if self._index is None:
            self._build_index()
        start, at = self._order.get(id(outer)), self._order.get(id(node))
        return start is not None and at is not None and start < at <= self._end(outer)

    def span_in(self, nodes: Sequence[ast.AST], outer: ast.AST) -> tuple[int, int]:
        """The slice of `nodes` (of this tree, in source order) inside `outer`'s subtree, as (start, stop)."""
        if outer is self.tree:
            return 0, len(nodes)
        if self._index is None:
            self._build_index()
        start, order = self._order.get(id(outer)), self._order
        if start is None:
            return 0, 0
        end = self._end(outer)
        return _first_numbered(nodes, order, start + 1), _first_numbered(nodes, order, end + 1)

    def named_within(self, identifier: str, outer: ast.AST) -> list[ast.Name]:
        """The `Name` nodes spelling `identifier` inside `outer`'s subtree, in source order (a slice of `named`)."""
        named = self.named(identifier)
        start, stop = self.span_in(named, outer)
        return named[start:stop]

    def code_scope(self, node: ast.AST) -> ast.AST:
        """The function, lambda or class whose own code `node` is (CODE_SCOPES), else the module (remembered
        per node: asked for every use of a name)."""
        scope = self._code_scopes.get(id(node))
        if scope is None:
            scope = next((a for a in self.ancestors(node) if isinstance(a, CODE_SCOPES)), self.tree)
            self._code_scopes[id(node)] = scope
        return scope

    def bound_uses(self, identifier: str, owner: Optional[AstScope]) -> list[ast.Name]:
        """The `Name` nodes spelling `identifier` whose binding is `owner`'s, in source order (grouped once per
        identifier: asked per binding, a scan of every such name each time was quadratic in a long file)."""
        groups = self._bound.get(identifier)
        if groups is None:
            groups = self._bound[identifier] = {}
            names = self.names
            for name in self.named(identifier):
                scope = names.binding_scope(name)
                if scope is not None:
                    groups.setdefault(id(scope), []).append(name)
        return groups.get(id(owner), []) if owner is not None else []

    def statement(self, node: ast.AST) -> ast.stmt:
        """The innermost statement holding `node` (itself when it is one)."""
        current: Optional[ast.AST] = node
        while current is not None and not isinstance(current, ast.stmt):
            current = self.parent(current)
        assert isinstance(current, ast.stmt), "a node outside any statement"
        return current

    def enclosing_function(self, node: ast.AST) -> Optional[FunctionNode]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return ancestor
        return None

    # -- text ------------------------------------------------------------------------------------
    def _line_table(self) -> tuple[list[str], list[int]]:
        if self._lines is None or self._starts is None:
            from gpulint.core.lines import LineIndex

            index = LineIndex(self.text)
            self._starts = index.starts
            self._lines = [index.line_text(row + 1) for row in range(len(index.starts))]
        return self._lines, self._starts

    def column(self, lineno: int, col_offset: int) -> int:
        """The 0-based character column of `ast`'s UTF-8 byte column on row `lineno`."""
        lines, _ = self._line_table()
        if lineno < 1 or lineno > len(lines):
            return col_offset
        line = lines[lineno - 1]
        if line.isascii():
            return col_offset
        return len(line.encode("utf-8", "surrogatepass")[:col_offset].decode("utf-8", "replace"))

    def offset(self, lineno: int, col_offset: int) -> int:
        """The character offset in the text of an `ast` position."""
        _, starts = self._line_table()
        row = min(max(lineno, 1), len(starts)) - 1
        return min(starts[row] + self.column(lineno, col_offset), len(self.text))

    def line(self, row: int) -> str:
        """The text of 1-based row `row` without its line break ("" past the end)."""
        lines, _ = self._line_table()
        return lines[row - 1] if 1 <= row <= len(lines) else ""

    def row(self, offset: int) -> int:
        """The 1-based row holding character offset `offset` of the text."""
        import bisect

        _, starts = self._line_table()
        return max(1, bisect.bisect_right(starts, offset))

    def segment(self, node: ast.AST) -> str:
        """The source text of `node`."""
        span = AstSpan.of(node)
        return self.text[self.offset(span.lineno, span.col_offset):self.offset(span.end_lineno, span.end_col_offset)]

    def statement_rows(self, statement: ast.stmt) -> tuple[int, int]:
        """The rows a `# noqa` for this statement may sit on: a simple statement's rows, or a block's
        header (decorators to the colon)."""
        first = statement.lineno
        decorators = getattr(statement, "decorator_list", None)
        if decorators:
            first = min(first, *(d.lineno - (1 if self._at_sign_above(d) else 0) for d in decorators))
        if not isinstance(statement, _COMPOUND):
            return first, statement.end_lineno or statement.lineno
        return first, self._header_end_row(statement)

    def _at_sign_above(self, decorator: ast.expr) -> bool:
        return False  # `@` and its expression share a row in any code Python accepts but `@\` continuations

    def _header_end_row(self, statement: ast.stmt) -> int:
        """The row of the colon that ends a block statement's header."""
        body = getattr(statement, "body", None)
        first_body = body[0].lineno if body and isinstance(body, list) and hasattr(body[0], "lineno") \
            else (statement.end_lineno or statement.lineno)
        lines, _ = self._line_table()
        start = statement.lineno
        source = "\n".join(lines[start - 1:first_body]) + "\n"
        depth = 0
        lambdas = 0
        try:
            for token in tokenize.generate_tokens(io.StringIO(source).readline):
                if token.type == tokenize.OP:
                    if token.string in "([{":
                        depth += 1
                    elif token.string in ")]}":
                        depth -= 1
                    elif token.string == ":" and depth == 0:
                        if lambdas:
                            lambdas -= 1
                            continue
                        return start + token.start[0] - 1
                elif token.type == tokenize.NAME and token.string == "lambda" and depth == 0:
                    lambdas += 1
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
        return max(start, first_body - 1) if first_body > start else start

    # -- reporting -------------------------------------------------------------------------------
    def in_test_function(self, node: ast.AST) -> bool:
        """`node` lies in a `test*` function that compares results (analysis/test_code.py on `ast`)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and ancestor.name.startswith("test") \
                    and _asserts(ancestor):
                return True
        return False

    def report(self, rule: Reporting, node: ast.AST, message: str, *, fix: Optional[Applicability] = None,
               fix_message: str = "", data: Optional[dict[str, Any]] = None,
               statement: Optional[ast.stmt] = None, note: str = "",
               decision: Optional[Decision] = None) -> None:
        """Report `node`. `fix` is the applicability of the fix `rule.build_fix` will build (None: no
        fix); `data` holds plain facts it needs. `statement` (default: the innermost statement holding
        `node`) scopes `# noqa`. With `decision`, report only when it allows, noting undecided premises.
        Rules that stay out of test files, or out of test functions (`in_test_functions`), stay out of `test_*`
        functions that compare results."""
        if decision is not None:
            if not decision.report:
                return
            if decision.assumed:
                assumed = undecided_note(decision.undecided)
                note = f"{assumed}; {note}" if note else assumed
        if not (rule.in_tests and rule.in_test_functions) and not self.settings.lint_tests \
                and self.in_test_function(node):
            return
        if statement is None:
            statement = self.statement(node)
        self.detections.append(Detection(
            code=rule.code, name=rule.name, span=AstSpan.of(node), message=message, fix=fix, fix_message=fix_message,
            data=data, note=note, statement_rows=self.statement_rows(statement), node_type=type(node).__name__,
        ))


def _first_numbered(nodes: Sequence[ast.AST], order: dict[int, int], number: int) -> int:
    """The index of the first of `nodes` (in preorder) numbered `number` or later (bisect without `key=`, 3.9)."""
    low, high = 0, len(nodes)
    while low < high:
        middle = (low + high) // 2
        if order[id(nodes[middle])] < number:
            low = middle + 1
        else:
            high = middle
    return low


def _source_order(node: ast.AST, children: list[ast.AST]) -> list[ast.AST]:
    """Children in source order where `ast`'s field order differs: decorators before their def, a dict's
    keys before their values, `a if c else b`."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if not node.decorator_list:
            return children
        decorators = {id(d) for d in node.decorator_list}
        return list(node.decorator_list) + [c for c in children if id(c) not in decorators]
    if isinstance(node, ast.Dict):
        out: list[ast.AST] = []
        for key, value in zip(node.keys, node.values):
            if key is not None:
                out.append(key)
            out.append(value)
        return out
    if isinstance(node, ast.IfExp):
        return [node.body, node.test, node.orelse]
    return children


def _asserts(function: FunctionNode) -> bool:
    for node in (n for statement in function.body for n in walk_nodes(statement)):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name.startswith("assert") or name == "allclose":
                return True
    return False
