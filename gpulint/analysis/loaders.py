"""DataLoader calls on CPython's `ast` (issue 25): the dataset behind a loader, and what each item costs.

Whether the dataset holds tensors already on a device, items computed up front, or work done per
item, read from the call, the names it is built from, and the project's dataset classes (the kinds are
the project facts' own: project/facts.py IN_MEMORY, NOTHING, ON_DEVICE, WORK). Shared by GPU101 and
GPU102 (ported from the LibCST analyses that this module replaced); other loader rules import it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import field
from functools import cached_property
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from gpulint.analysis.ast_context import LOCAL, AstContext, AstKeywordArgs, AstScope, positional_args
from gpulint.analysis.ast_values import is_literal, self_attribute_value, single_value, value_at
from gpulint.analysis.evidence import Premise
from gpulint.analysis.reach import in_main_block
from gpulint.core.torch_api import (
    DATALOADER,
    DATALOADER_DATASET,
    DATALOADER_NUM_WORKERS,
    DATASET_SPLITS,
    DATASET_WRAPPERS,
    GRAD_OFF,
    SHAPE_METHODS,
    TENSOR_DATASET,
)
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import IN_MEMORY, NOTHING, ON_DEVICE, ClassFacts, moves_to_device
from gpulint.project.graph_data import SMALL_IMAGE_SETS
from gpulint.project.loader_flow import DEVICE_WORDS, IN, MOVED, NON_BLOCKING, RETURNS_SELF, own_nodes
from gpulint.records import dataclass

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
Definition = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]

_ON_DEVICE = re.compile(r"\.cuda\(|\.to\(|device\s*=")
_DATAPIPES = ("torchtext.datasets.", "torchdata.datapipes.")
# datasets these libraries build hold CPU data (PIL images, NumPy, Arrow): pinning cannot raise
_CPU_LIBRARIES = ("torchvision.datasets.", "datasets.load_dataset", "datasets.load_from_disk", "datasets.Dataset.")
_CPU_DATASET_METHODS = frozenset({"with_transform", "set_transform", "map", "select", "shuffle", "filter",
                                  "rename_column", "remove_columns", "with_format", "train_test_split"})
UNSHARDED = "unsharded-iterable"
_INDEX_NAMES = re.compile(r"(?:^|_)(?:idx|idxs|index|indices|ids|perm|nodes|node_ids)$", re.IGNORECASE)
_TEXT_FIELDS = frozenset({"prompt", "prompts", "text", "texts", "caption", "captions", "sentence", "question",
                          "instruction", "query", "string", "name", "path", "filename", "label_name"})


def _unstarred(expr: ast.expr) -> ast.expr:
    return expr.value if isinstance(expr, ast.Starred) else expr


def _all_arguments(call: ast.Call) -> list[ast.expr]:
    """Every argument's value, positional (a `*x`: x) then keyword, as LibCST lists `call.args`."""
    return [_unstarred(a) for a in call.args] + [k.value for k in call.keywords]


def _first_argument(call: ast.Call) -> Optional[ast.expr]:
    positional = positional_args(call) or []
    if positional:
        return positional[0]
    name, _ = DATALOADER_DATASET
    return next((k.value for k in call.keywords if k.arg == name), None)


def _preprocessed_rows(dataset: ast.expr, ctx: AstContext) -> bool:
    """`tokenized["train"]` where `tokenized = raw.map(tokenize, ...)` (then perhaps `.select(...)`):
    rows computed up front, no per-item transform."""
    names = ctx.names
    methods: set[str] = set()
    pending: list[ast.expr] = [dataset]
    seen: set[int] = set()
    while pending and len(seen) < 16:
        expr = pending.pop()
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            owner = names.binding_scope(expr)
            if owner is not None:
                pending.extend(v for v in owner.values.get(expr.id, []) if v is not None)
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            methods.add(expr.func.attr)
            pending.append(expr.func.value)  # `ds.map(f).select(...)`: the receiver's history too
    return "map" in methods and not {"with_transform", "set_transform"} & methods


def _passed_values(ctx: AstContext, name: ast.Name, owner: AstScope) -> list[ast.expr]:
    """The values the calls of a function of this file pass as its parameter `name` (never rebound in it), when
    the function's name is bound once, by its def, and used only to call it, each call passing the parameter
    (up to 8 calls): XMem's nested `construct_loader(dataset)`, which its train.py calls with each stage's
    dataset (blind25). [] otherwise (a method, a callback, a call leaving the parameter to its default)."""
    function = owner.node
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or owner.parent is None \
            or owner.parent.is_class or owner.bindings.get(name.id) != [LOCAL]:
        return []
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if name.id not in positional and name.id not in {a.arg for a in function.args.kwonlyargs}:
        return []
    outer = owner.parent
    if outer.bindings.get(function.name) != [LOCAL] or outer.values.get(function.name) != [None]:
        return []  # the def is not the name's only binding
    uses = ctx.bound_uses(function.name, outer)
    if not uses or len(uses) > 8:
        return []
    found: list[ast.expr] = []
    for use in uses:
        call = ctx.parent(use)
        if not isinstance(call, ast.Call) or call.func is not use:
            return []  # handed on (a callback), not only called
        value = next((k.value for k in call.keywords if k.arg == name.id), None)
        if value is None and name.id in positional:
            index = positional.index(name.id)
            if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]) or index >= len(call.args):
                return []
            value = call.args[index]
        if value is None or isinstance(value, ast.Starred):
            return []
        found.append(value)
    return found


def _is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def _split_part(ctx: AstContext, name: ast.Name) -> Optional[ast.expr]:
    """`train, val = random_split(ds, [n, m])`, the one binding of `name` in its scope: the dataset split
    (`ds`), whose items the parts keep."""
    owner = ctx.names.binding_scope(name)
    if owner is None or len(owner.bindings.get(name.id, [])) != 1:
        return None
    for node in ctx.nodes(ast.Assign):
        assert isinstance(node, ast.Assign)
        value = node.value
        if not (isinstance(value, ast.Call) and len(node.targets) == 1
                and isinstance(node.targets[0], (ast.Tuple, ast.List))):
            continue
        if any(isinstance(e, ast.Name) and e.id == name.id and ctx.names.binding_scope(e) is owner
               for e in node.targets[0].elts) and ctx.qualname(value.func) in DATASET_SPLITS:
            return _first_argument(value)
    return None


def local_definitions(ctx: AstContext) -> dict[str, list[Definition]]:
    """Every def and class statement of the file, by name (any scope)."""
    found: dict[str, list[Definition]] = {}
    for node in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        found.setdefault(node.name, []).append(node)
    return found


def local_definition(ctx: AstContext, func: ast.expr, at: ast.AST) -> Optional[Definition]:
    """The def or class statement of this file that `func` names (any scope), or for `self.<name>` a method of
    the class `at` is in."""
    index = ctx.analysis(local_definitions)
    names = ctx.names
    if isinstance(func, ast.Name):
        owner = names.binding_scope(func)
        if owner is None:
            return None
        candidates = [d for d in index.get(func.id, []) if names.scopes.get(id(d)) is not None
                      and names.scopes[id(d)].parent is owner]
        return candidates[0] if len(candidates) == 1 else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = next((a for a in ctx.ancestors(at) if isinstance(a, ast.ClassDef)), None)
        if cls is None:
            return None
        found = [d for d in index.get(func.attr, []) if ctx.parent(d) is cls
                 and isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return found[0] if len(found) == 1 else None
    return None


def qualname_of(ctx: AstContext, definition: Definition) -> str:
    """A class's `__qualname__` as the project facts key it: `train.<locals>.Frames`, `Outer.Inner`."""
    parts: list[str] = [definition.name]
    for ancestor in ctx.ancestors(definition):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(f"{ancestor.name}.<locals>")
        elif isinstance(ancestor, ast.ClassDef):
            parts.append(ancestor.name)
    return ".".join(reversed(parts))


def _indexes(dataset: ast.expr, ctx: AstContext) -> bool:
    """A dataset of integers: `range(n)`, `list(range(n))`, `torch.arange(n)`, `train_idx.tolist()`."""
    if isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Name) and dataset.func.id == "list" \
            and len(dataset.args) + len(dataset.keywords) == 1:
        dataset = _all_arguments(dataset)[0]
    if not isinstance(dataset, ast.Call):
        return False
    func = dataset.func
    if isinstance(func, ast.Name) and func.id == "range" and ctx.names.binding_scope(func) is None:
        return True
    if ctx.qualname(func) in ("torch.arange", "numpy.arange", "torch.randperm", "numpy.random.permutation"):
        return True
    if isinstance(func, ast.Attribute) and func.attr == "tolist":
        receiver = func.value
        name = receiver.id if isinstance(receiver, ast.Name) else (
            receiver.attr if isinstance(receiver, ast.Attribute) else "")
        return bool(_INDEX_NAMES.search(name))
    return False


def collates_on_device(ctx: AstContext, collate: Optional[ast.expr], at: ast.AST) -> bool:
    """A `collate_fn` that moves the batch's tensors to a device, by the test that puts a Dataset class's items
    there (facts.moves_to_device: `.cuda()`, `.to(device)`, a torch factory with `device=`): a function of the
    file (any scope) or of a project module (ProjectView.device_collates) that does so in its own code or in a
    function of the file it calls (one level), a lambda that does or calls such a function, or
    `functools.partial` of one; also through a name bound once to a lambda or a partial."""
    if isinstance(collate, ast.Name) and local_definition(ctx, collate, at) is None:
        value = single_value(collate, ctx.names)
        if isinstance(value, (ast.Lambda, ast.Call)):
            collate = value  # `collate = partial(pad_and_move, device=device)`, then `collate_fn=collate`
    if isinstance(collate, ast.Lambda):
        return moves_to_device(collate, ctx.names.imports, lambda call: _function_moves(ctx, call.func, call, 1))
    if isinstance(collate, ast.Call) and ctx.qualname(collate.func) == "functools.partial":
        collate = _first_argument_of(collate)
    return collate is not None and _function_moves(ctx, collate, at, 1)


def _first_argument_of(call: ast.Call) -> Optional[ast.expr]:
    """The call's first positional argument, unless it is a `*args`."""
    return call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None


def _function_moves(ctx: AstContext, func: ast.expr, at: ast.AST, levels: int) -> bool:
    """`func` names a function that moves tensors to a device in its own code or, `levels` deep, in the
    functions of the file it calls; one of a project module, by its module's facts (its own code and the
    top-level functions of its file it calls)."""
    if ctx.qualname(func) in ctx.project.device_collates:
        return True
    definition = local_definition(ctx, func, at)
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    calls_mover = (lambda call: _function_moves(ctx, call.func, call, levels - 1)) if levels > 0 else None
    return moves_to_device(definition, ctx.names.imports, calls_mover)


def _is_string(expr: ast.AST) -> bool:
    return isinstance(expr, ast.JoinedStr) or (isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes)))


def _text_only(expr: ast.expr) -> bool:
    """Strings, f-strings, lists/tuples/dicts of them, or a list of a parameter's string fields
    (`[item["prompt"] for item in batch]`, `[p for p, _ in batch]`): no tensor."""
    if _is_string(expr):
        return True
    if isinstance(expr, (ast.List, ast.Tuple)):
        return bool(expr.elts) and all(_text_only(_unstarred(e)) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return bool(expr.keys) and all(k is not None and _text_only(v) for k, v in zip(expr.keys, expr.values))
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "join" \
            and isinstance(expr.func.value, ast.Constant) and isinstance(expr.func.value.value, (str, bytes)):
        return True
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        element = expr.elt
        # `[x["text"] for x in batch]`: a field of each item named like text
        while isinstance(element, ast.Subscript):
            key = element.slice.elts[0] if isinstance(element.slice, ast.Tuple) and element.slice.elts \
                else element.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.lower() in _TEXT_FIELDS:
                return True
            element = element.value
        if isinstance(element, ast.Attribute) and element.attr.lower() in _TEXT_FIELDS:
            return True
    return False


def dataloader_call(ctx: AstContext, node: ast.Call) -> Optional["LoaderCall"]:
    """A torch DataLoader call whose arguments we can see completely, else None."""
    if ctx.qualname(node.func) not in DATALOADER:
        return None
    if _one_batch(ctx, node):
        return None  # `next(iter(DataLoader(...)))`: one batch, then the loader is gone
    kwargs = ctx.kwargs(node)
    if not kwargs.complete or positional_args(node) is None:
        return None
    return LoaderCall(ctx, node, kwargs)


def _argument_of(ctx: AstContext, node: ast.AST) -> Optional[ast.Call]:
    """The call `node` is an argument of (positional, starred or keyword), else None."""
    parent = ctx.parent(node)
    if isinstance(parent, (ast.keyword, ast.Starred)):
        parent = ctx.parent(parent)
    if isinstance(parent, ast.Call) and parent.func is not node:
        return parent
    return None


def _one_batch(ctx: AstContext, node: ast.Call) -> bool:
    holder = _argument_of(ctx, node)
    if not (holder is not None and isinstance(holder.func, ast.Name) and holder.func.id == "iter"):
        return False
    outer = _argument_of(ctx, holder)
    return outer is not None and isinstance(outer.func, ast.Name) and outer.func.id == "next"


def _constant(expr: ast.expr) -> bool:
    """A literal number, string, bool or None: never a tensor."""
    if isinstance(expr, ast.Constant):
        return expr.value is not Ellipsis
    return isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant) \
        and type(expr.operand.value) in (int, float)  # -1


def _loaded_names(expr: ast.AST) -> list[ast.Name]:
    """The names an expression reads (core/names.py's NameUses: not a walrus target)."""
    stores = {id(n.target) for n in walk_nodes(expr) if isinstance(n, ast.NamedExpr)}
    return [n for n in walk_nodes(expr) if isinstance(n, ast.Name) and id(n) not in stores]


def _returns(definition: FunctionNode, skip: tuple[type, ...]) -> list[ast.Return]:
    """The return statements of `definition`, not entering nested nodes of the `skip` kinds."""
    found: list[ast.Return] = []
    pending: list[ast.AST] = list(definition.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        if isinstance(node, skip):
            continue
        pending.extend(child_nodes(node))
    return found


class LoaderCall:
    """One DataLoader call and what gpulint can tell about the dataset it loads from."""

    def __init__(self, ctx: AstContext, node: ast.Call, kwargs: AstKeywordArgs,
                 start: Optional[ast.expr] = None) -> None:
        self.ctx = ctx
        self.node = node
        self.kwargs = kwargs
        self.start = start  # one of several values the dataset argument may hold (see `alternatives`)

    @cached_property
    def workers(self) -> tuple[bool, Optional[ast.expr]]:
        """(passed, value) of `num_workers`, by keyword, through a visible `**dict` or by position."""
        name, position = DATALOADER_NUM_WORKERS
        positional = positional_args(self.node) or []
        if len(positional) > position:
            return True, positional[position]
        return self.kwargs.passed(name), self.kwargs.get(name)

    @property
    def no_workers_chosen(self) -> bool:
        """An explicit `num_workers=0`: the user chose to load (and pin) in the training process."""
        passed, value = self.workers
        return passed and is_literal(self.ctx, value, "0")

    @cached_property
    def argument(self) -> Optional[ast.expr]:
        """The dataset argument as written in the call."""
        name, _ = DATALOADER_DATASET
        if self.kwargs.passed(name):
            return self.kwargs.get(name)
        positional = positional_args(self.node) or []
        return positional[0] if positional else None

    def alternatives(self) -> list["LoaderCall"]:
        """One view per value the dataset argument may hold: `dataset = ImageFolder(...)` on one branch,
        `dataset = CIFAR10(...)` on another. Evidence about the items must hold for every one."""
        expr = self.argument
        if self.start is not None or not isinstance(expr, ast.Name) or value_at(self.ctx, expr) is not None:
            return [self]
        owner = self.ctx.names.binding_scope(expr)
        if owner is None:
            return [self]
        passed = _passed_values(self.ctx, expr, owner)
        if passed:
            return [LoaderCall(self.ctx, self.node, self.kwargs, start=v) for v in passed]
        targets = owner.bindings.get(expr.id, [])
        values = owner.values.get(expr.id, [])
        if not values or len(values) > 8 or any(t is not None for t in targets) or any(v is None for v in values):
            return [self]
        return [LoaderCall(self.ctx, self.node, self.kwargs, start=v) for v in values if v is not None]

    @cached_property
    def dataset(self) -> Optional[ast.expr]:
        """The dataset expression, followed through plain assignments (of names and of `self.x`) and
        through the wrappers that keep their items (`Subset`, `random_split`, `ConcatDataset`)."""
        expr = self.start if self.start is not None else self.argument
        ctx = self.ctx
        for _ in range(8):
            if expr is None:
                return None
            if isinstance(expr, ast.Name):
                value = value_at(ctx, expr)
                expr = value if value is not None else _split_part(ctx, expr)
            elif isinstance(expr, ast.Attribute) and ctx.qualname(expr) is None:
                value = self_attribute_value(ctx, expr, skip_none=True)
                if value is None:
                    return expr
                expr = value
            elif isinstance(expr, ast.Call) and self._returned_by(expr) is not None:
                expr = self._returned_by(expr)  # `build_dataset(...)`, `self.get_dataset()`: what it returns
            elif isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Call) \
                    and ctx.qualname(expr.value.func) in DATASET_SPLITS:
                expr = _first_argument(expr.value)  # random_split(ds, ...)[0]
            elif isinstance(expr, ast.Call) and ctx.qualname(expr.func) in DATASET_SPLITS:
                expr = _first_argument(expr)  # `self.train, self.val = random_split(ds, ...)`
            elif isinstance(expr, ast.Call) and ctx.qualname(expr.func) in DATASET_WRAPPERS:
                first = _first_argument(expr)
                while isinstance(first, ast.BinOp) and isinstance(first.op, (ast.Add, ast.Mult)):
                    # `[davis] * 5 + [yv]`: its first part (judged by it, as a list's first element)
                    first = first.right if isinstance(first.op, ast.Mult) and not isinstance(
                        first.left, (ast.List, ast.Tuple)) else first.left
                if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
                    first = _unstarred(first.elts[0])  # ConcatDataset([a, b]): judged by its first part
                expr = first
            else:
                return expr
        return expr

    def _returned_by(self, call: ast.Call) -> Optional[ast.expr]:
        """The one value a function of this file returns (a dataset factory), when `call` calls one that
        is not a class: `make_dataset(...)`, or a method through `self.make_dataset(...)`."""
        definition = local_definition(self.ctx, call.func, self.node)
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        values = [r.value for r in _returns(definition, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                          ast.Lambda))]
        return values[0] if len(values) == 1 and values[0] is not None else None

    @cached_property
    def constructors(self) -> tuple[str, ...]:
        """The imported classes (qualified) the dataset's call may call: its callee's own import, or for a
        name every binding of which in its scope is an import or an imported class (`dataset_class =
        torchvision.datasets.CIFAR10` on one branch, `... CIFAR100` on another), each of them; () when
        one binding is anything else. The classifiers below judge every one and ask them to agree."""
        dataset = self.dataset
        if not isinstance(dataset, ast.Call):
            return ()
        ctx = self.ctx
        func = dataset.func
        qualified = ctx.qualname(func)
        if qualified is not None:
            return (qualified,)
        if not isinstance(func, ast.Name):
            return ()
        owner = ctx.names.binding_scope(func)
        if owner is None:
            return ()
        targets = owner.bindings.get(func.id, [])
        values = owner.values.get(func.id, [])
        found: list[str] = []
        for target, value in zip(targets, values):
            spelled = target if target is not None else (ctx.qualname(value) if value is not None else None)
            if spelled is None:
                return ()  # a def, a parameter, a call's result: not a class gpulint can name
            found.append(spelled)
        return tuple(found) if 0 < len(found) <= 8 else ()

    @cached_property
    def dataset_class(self) -> Optional[ClassFacts]:
        """What the project knows of the dataset's class: defined in this file or imported from the project."""
        dataset = self.dataset
        if not isinstance(dataset, ast.Call):
            return None
        ctx = self.ctx
        func = dataset.func
        qualified = ctx.qualname(func)
        if qualified in TENSOR_DATASET:
            on_device = any(self._on_device(value) for value in _all_arguments(dataset))
            return ClassFacts((qualified,), ON_DEVICE if on_device else IN_MEMORY)
        project = ctx.project
        if qualified is not None:
            return project.class_facts(qualified)
        if len(self.constructors) > 1 or (self.constructors and self.constructors[0] not in TENSOR_DATASET):
            known = [project.class_facts(each) for each in self.constructors]
            return known[0] if all(each == known[0] for each in known) else None  # the bindings must agree
        if isinstance(func, ast.Name):
            names = ctx.names
            owner = names.binding_scope(func)
            if owner is None:
                return project.star_classes.get(func.id)  # from a `from module import *`
            if owner is names.module_scope:
                found = project.own.classes.get(func.id)
                if found is None and func.id in project.own.factories:
                    found = project.own.classes.get(project.own.factories[func.id])
                return found
            definition = local_definition(ctx, func, self.node)  # a class defined inside a function or a method
            if isinstance(definition, ast.ClassDef):
                return project.own.classes.get(qualname_of(ctx, definition))
        return None

    @cached_property
    def hands_over_values(self) -> bool:
        """The dataset class puts constructor arguments into its items as they were given, and this call
        passes one of them something that may be a tensor, whose device this file does not show
        (DreamBooth's precomputed prompt embeddings): pinning may raise."""
        found = self.dataset_class
        dataset = self.dataset
        if found is None or not found.passed_arguments or not isinstance(dataset, ast.Call):
            return False
        if _spread(dataset):
            return True  # `*args`/`**kwargs`: which argument lands where is not visible
        for entry in found.passed_arguments:
            value = _passed(dataset, entry)
            if value is not None and not self._never_a_tensor(value):
                return True
        return False

    def _never_a_tensor(self, expr: ast.expr) -> bool:
        """A literal, or a command-line value (`args.prompt`, an option this file's argparse declares)."""
        if isinstance(expr, ast.IfExp):
            return self._never_a_tensor(expr.body) and self._never_a_tensor(expr.orelse)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id != "self":
            return expr.attr in self.ctx.project.own.argparse_defaults
        return _constant(expr)

    @cached_property
    def dataset_kind(self) -> Optional[str]:
        if self._collates_to_text():
            return NOTHING  # `collate_fn` returns the prompts as strings: the batch holds no tensor
        if self.kwargs.passed("collate_fn") and collates_on_device(self.ctx, self.kwargs.get("collate_fn"), self.node):
            return ON_DEVICE  # the batch is put on the GPU as it is collated (bertabs' `collate(..., device=)`)
        found = self.dataset_class
        if found is not None and found.dataset is not None:
            return found.plain if self._options_left_out else found.dataset
        dataset = self.dataset
        if dataset is None:
            return None
        if self._on_device(dataset):
            return ON_DEVICE
        if _preprocessed_rows(dataset, self.ctx) or self._built_by_row_function(dataset):
            return IN_MEMORY  # a Hugging Face dataset tokenised up front with .map(): a row lookup per item
        if isinstance(dataset, ast.BinOp) and isinstance(dataset.op, ast.Mult):
            dataset = next((side for side in (dataset.left, dataset.right)
                            if isinstance(side, (ast.List, ast.Tuple, ast.ListComp))), dataset)  # `[item] * n`
        if _indexes(dataset, self.ctx):
            return NOTHING  # `range(n)`, `torch.arange(n)`, `idx.tolist()`: batches of indices, nothing to pin
        if isinstance(dataset, (ast.List, ast.Tuple, ast.ListComp)) or (
                isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Attribute)
                and dataset.func.attr == "tolist"):
            return IN_MEMORY  # items built before the loader exists
        if isinstance(dataset, ast.Call) and (self.ctx.qualname(dataset.func) or "").startswith(_DATAPIPES):
            return UNSHARDED  # torchtext's iterable datapipes: every worker would yield the whole stream
        return None

    @cached_property
    def _options_left_out(self) -> bool:
        """The dataset's class does per-item work only through callables its constructor may be given
        (ClassFacts.optional_work: `t=None`, then `self.T(sample)`), and this call passes none of them (or
        None): its items cost what the class does without them."""
        found = self.dataset_class
        dataset = self.dataset
        if found is None or not found.optional_work or not isinstance(dataset, ast.Call):
            return False
        if _spread(dataset):
            return False  # `*args`/`**kwargs`: which argument lands where is not visible
        for entry in found.optional_work:
            value = _passed(dataset, entry)
            if value is not None and not _is_none(value):
                return False
        return True

    def _collates_to_text(self) -> bool:
        """`collate_fn=` a function of the file (or a lambda) that only returns strings, lists of them, or
        dicts of them: the batch has no tensor to pin or to move."""
        if not self.kwargs.passed("collate_fn"):
            return False
        collate = self.kwargs.get("collate_fn")
        if isinstance(collate, ast.Lambda):
            return _text_only(collate.body)
        if not isinstance(collate, ast.Name):
            return False
        definition = local_definition(self.ctx, collate, self.node)
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        returns = [r.value for r in _returns(definition, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return bool(returns) and all(r is not None and _text_only(r) for r in returns)

    @cached_property
    def bulk(self) -> bool:
        """The items are decoded images, audio or arrays (a dataset class that decodes them, a torchvision
        dataset, a Hugging Face dataset with a per-item transform): a batch worth pinning."""
        found = self.dataset_class
        if found is not None and found.dataset is not None:
            return found.plain_bulk if self._options_left_out else found.bulk
        dataset = self.dataset
        while isinstance(dataset, ast.Subscript):
            dataset = dataset.value
        if isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Attribute) \
                and dataset.func.attr in ("with_transform", "set_transform"):
            return True
        if isinstance(dataset, ast.Name):
            dataset = single_value(dataset, self.ctx.names)
        if dataset is self.dataset:
            return bool(self.constructors) and all(c.startswith("torchvision.datasets.") for c in self.constructors)
        return isinstance(dataset, ast.Call) and (self.ctx.qualname(dataset.func) or "").startswith(
            "torchvision.datasets.")

    @cached_property
    def token_ids(self) -> bool:
        """The items are only token ids a tokenizer made (a dataset class of this file or the project that
        project/token_items.py reads so): a batch of a few KB."""
        found = self.dataset_class
        return found is not None and found.dataset is not None and found.token_ids

    @cached_property
    def library_dataset(self) -> bool:
        """A dataset from a library that loads into CPU memory: torchvision, Hugging Face datasets."""
        dataset = self.dataset
        while isinstance(dataset, ast.Subscript):
            dataset = dataset.value  # `raw["train"]`
        while isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Attribute) \
                and dataset.func.attr in _CPU_DATASET_METHODS and self.ctx.qualname(dataset.func) is None:
            dataset = dataset.func.value  # `load_dataset(...)["train"].with_transform(f)`
            while isinstance(dataset, ast.Subscript):
                dataset = dataset.value
        if isinstance(dataset, ast.Name):
            dataset = single_value(dataset, self.ctx.names)
            while isinstance(dataset, ast.Subscript):
                dataset = dataset.value
        if not isinstance(dataset, ast.Call):
            return False
        if dataset is self.dataset:
            return bool(self.constructors) and all(c.startswith(_CPU_LIBRARIES) for c in self.constructors)
        return (self.ctx.qualname(dataset.func) or "").startswith(_CPU_LIBRARIES)

    def _built_by_row_function(self, dataset: ast.expr) -> bool:
        """`get_dataset(...)`, a project function that tokenises with `.map()` and returns the result."""
        if not (isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Name)):
            return False
        project = self.ctx.project
        names = self.ctx.names
        if names.binding_scope(dataset.func) is names.module_scope and dataset.func.id in project.own.row_functions:
            return True
        return self.ctx.qualname(dataset.func) in project.row_functions

    @cached_property
    def dataset_undefined(self) -> bool:
        """A call of a name the file neither defines nor imports (and no `import *` could bring)."""
        dataset = self.dataset
        return (isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Name)
                and self.ctx.names.binding_scope(dataset.func) is None and "import *" not in self.ctx.text)

    def _on_device(self, expr: ast.expr, depth: int = 0) -> bool:
        """The tensors already live on a device: `.cuda()`, `.to(device)`, `device=` at creation, here
        or in any value assigned to a name the expression uses (`x = x.to(device)`, then
        `TensorDataset(torch.stack([x] * n))`)."""
        if _ON_DEVICE.search(self.ctx.segment(expr)):
            return True
        if depth >= 3:
            return False
        names = self.ctx.names
        for name in _loaded_names(expr):
            owner = names.binding_scope(name)
            if owner is None:
                continue
            for value in owner.values.get(name.id, []):
                if value is not None and value is not expr and self._on_device(value, depth + 1):
                    return True
        return False


# ------------------------------------------------------------------------------------------------
# where a loader's batches go (ported from the LibCST batch analysis, and the copies part of
# rewrites/async_copies.py): loops over the loader, the batch names they bind, copies to a device
# ------------------------------------------------------------------------------------------------

# calls that hand the loader's batches on unchanged: `for i, b in enumerate(tqdm(loader))`
_PASS_THROUGH = frozenset({"enumerate", "tqdm", "zip", "iter", "trange", "islice", "cycle", "chain"})
_LIGHTNING_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
_LIGHTNING_FIT = frozenset({"fit", "validate", "test", "predict"})
MOVES = frozenset({"to", "cuda"})
# calls that wrap an iterable and hand its items on: `enumerate(loader)`, `tqdm(loader, desc=...)`
_COPY_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "track", "progress_bar", "ProgressBar", "Bar"})
_HOST_READS = frozenset({"item", "tolist", "numpy", "cpu"})
_HOST_FUNCTIONS = frozenset({"print", "float", "int", "bool", "str", "repr"})
# how many hand-overs (a name, a return, a parameter) the follower takes from the DataLoader call: CLIP's loader is
# built in build_loaders(), returned, stored, handed to train_epoch(), wrapped in tqdm and stored again
_FOLLOW_DEPTH = 6
_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
Loop = Union[ast.For, ast.AsyncFor]


@dataclass
class BatchUse:
    """What the file shows of a loader's batches."""

    moves: list[ast.Call] = field(default_factory=list)  # `.to(...)`/`.cuda(...)` on a batch, in a loop over it
    framework: Optional[str] = None  # "accelerate" or "lightning": the framework moves the batches
    iterated: bool = False  # some loop (or next()) over the loader was found
    # what the modules that import this one do with the batches of a loader a top-level function returns
    # (ProjectView.moved_returns): MOVED, NON_BLOCKING, CUDA, and "in:<path>" for each consuming file
    elsewhere: frozenset[str] = frozenset()

    accelerate_non_blocking: bool = False  # the file builds DataLoaderConfiguration(non_blocking=True)

    @property
    def non_blocking(self) -> bool:
        """A move already asks for an asynchronous copy (or the framework makes one: Lightning on CUDA,
        Accelerate configured with `DataLoaderConfiguration(non_blocking=True)`)."""
        return self.framework == "lightning" or any(_non_blocking(c) for c in self.moves) \
            or NON_BLOCKING in self.elsewhere or (self.framework == "accelerate" and self.accelerate_non_blocking)

    @property
    def consumers(self) -> tuple[str, ...]:
        """The files of the project that copy the batches, when another module does."""
        return tuple(sorted(k[len(IN):] for k in self.elsewhere if k.startswith(IN)))


_ACCELERATE_CONFIGS = frozenset({"accelerate.DataLoaderConfiguration", "accelerate.utils.DataLoaderConfiguration",
                                 "accelerate.utils.dataclasses.DataLoaderConfiguration"})


def _accelerate_non_blocking(ctx: AstContext) -> bool:
    """The file builds Accelerate's `DataLoaderConfiguration(non_blocking=True)` (accelerate >= 0.28): the
    batches `accelerator.prepare` moves are then copied asynchronously (its default copy is blocking)."""
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if ctx.qualname(call.func) in _ACCELERATE_CONFIGS and any(
                k.arg == "non_blocking" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in call.keywords):
            return True
    return False


def _non_blocking(call: ast.Call) -> bool:
    return any(k.arg == "non_blocking" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
               for k in call.keywords)


def _scope_node(ctx: AstContext, node: ast.AST) -> ast.AST:
    """The function, lambda, class or module whose code `node` is."""
    return next((a for a in ctx.ancestors(node) if isinstance(a, _SCOPE_NODES)), ctx.tree)


def _reads(expr: ast.AST) -> set[str]:
    """The names an expression reads (core/names.py NameUses.reads: not a walrus target)."""
    return {n.id for n in _loaded_names(expr)}


def _bound(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for element in target.elts:
            out |= _bound(element)
        return out
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return set()


def _to_a_device(ctx: AstContext, call: ast.Call) -> bool:
    """`.cuda(...)`, or `.to(...)` with a device (not only a dtype, not "cpu")."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return True
    passed: list[tuple[Optional[str], ast.expr]] = [(None, _unstarred(a)) for a in call.args]
    passed += [(k.arg, k.value) for k in call.keywords]
    for keyword, value in passed:
        if keyword is not None and keyword not in ("device", "non_blocking"):
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, (str, bytes)) and "cpu" in ctx.segment(value):
            return False
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "torch" \
                and value.attr in ("float32", "float16", "bfloat16", "float", "long", "int64", "half"):
            return False
    return bool(passed)


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def loader_batches(ctx: AstContext, loader: ast.Call) -> BatchUse:
    """Follow the DataLoader call `loader` to the loops that read its batches."""
    return _Follower(ctx).follow(loader)


class _Follower:
    def __init__(self, ctx: AstContext) -> None:
        self.ctx = ctx
        self.use = BatchUse()
        self.seen: set[int] = set()
        # the calls of a function of the file the loader was handed to (`infiniteloop(loader)`), by the function
        self.entered: dict[int, list[ast.Call]] = {}

    def follow(self, loader: ast.Call) -> BatchUse:
        self._expression(loader, depth=0)
        return self.use

    def _expression(self, expr: ast.expr, depth: int) -> None:
        """`expr` evaluates to the loader: see what its surroundings do with it."""
        if id(expr) in self.seen or depth > _FOLLOW_DEPTH:
            return
        self.seen.add(id(expr))
        ctx = self.ctx
        parent = ctx.parent(expr)
        if isinstance(parent, ast.Call) and parent.func is not expr:
            self._argument(parent, None, False, expr, depth)
        elif isinstance(parent, ast.keyword):
            call = ctx.parent(parent)
            if isinstance(call, ast.Call):
                self._argument(call, parent.arg, parent.arg is None, expr, depth)
        elif isinstance(parent, ast.Starred) and isinstance(ctx.parent(parent), ast.Call):
            self._argument(ctx.parent(parent), None, True, expr, depth)  # type: ignore[arg-type]
        elif isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is expr:
            self._loop(parent.target, parent.body)
            self._generator(parent, depth)
        elif isinstance(parent, ast.comprehension) and parent.iter is expr:
            self._loop(parent.target, ctx.parent(parent))
        elif isinstance(parent, ast.Assign) and parent.value is expr:
            for target in parent.targets:
                self._stored(target, depth)
        elif isinstance(parent, ast.AnnAssign) and parent.value is expr:
            self._stored(parent.target, depth)
        elif isinstance(parent, ast.withitem) and parent.context_expr is expr and parent.optional_vars is not None:
            self._stored(parent.optional_vars, depth)  # `with tqdm(loader) as progress_bar:` (Grad-TTS)
        elif isinstance(parent, ast.Return):
            self._returned(expr, depth)
        elif isinstance(parent, (ast.Tuple, ast.List)):
            self._in_container(parent, expr, depth)
        elif isinstance(parent, ast.Dict) and isinstance(ctx.parent(parent), ast.Return):
            key = next((k for k, v in zip(parent.keys, parent.values) if v is expr), None)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._returned(parent, depth, f"[{key.value!r}]")  # `return {"train": loader, ...}`

    def _in_container(self, holder: Union[ast.Tuple, ast.List], expr: ast.expr, depth: int) -> None:
        """`return model, loader` / `a, b = x, loader`: followed only through a matching unpacking."""
        position = next((i for i, e in enumerate(holder.elts) if e is expr), None)
        parent = self.ctx.parent(holder)
        if position is None:
            return
        if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is holder:
            self._stored(parent.target, depth)  # `for loader in (train_loader, val_loader):`
        elif isinstance(parent, ast.Assign) and parent.value is holder:
            for target in parent.targets:
                if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(holder.elts):
                    self._stored(_unstarred(target.elts[position]), depth)
        elif isinstance(parent, ast.Return):
            self._returned(holder, depth, position)

    def _argument(self, call: ast.Call, keyword: Optional[str], star: bool, expr: ast.expr, depth: int) -> None:
        func = call.func
        name = _call_name(func)
        if name in _PASS_THROUGH:
            if name == "iter":
                self._iterator(call, depth)
            self._expression(call, depth)  # the same loader, handed on: no step further from where it was built
            return
        if name == "next":
            self._next(call)
            return
        if name == "prepare" and isinstance(func, ast.Attribute):
            self.use.framework = self.use.framework or "accelerate"  # accelerator.prepare(..., loader, ...)
            self.use.accelerate_non_blocking = self.ctx.analysis(_accelerate_non_blocking)
            self.use.iterated = True
            return
        if name in _LIGHTNING_FIT and isinstance(func, ast.Attribute):
            self.use.framework = "lightning"
            self.use.iterated = True
            return
        if isinstance(func, ast.Name) and (keyword is not None or not star):
            self._into_function(func, call, keyword, expr, depth)
        if keyword is not None or not star:
            self._into_import(func, call, keyword, expr)

    def _into_import(self, func: ast.expr, call: ast.Call, keyword: Optional[str], expr: ast.expr) -> None:
        """`train(model, loader, ...)` with `train` a function of a project module this file imports: what its
        loop over that parameter does with the batches (ProjectView.handed_moves). A name several imports bind
        (`from train import train` on one branch, `from train_flickr import train` on another) counts only
        when every one of them leads to such a function; the copies are then the ones all of them make."""
        handed = self.ctx.project.handed_moves
        if not handed:
            return
        if keyword is not None:
            slot = keyword
        else:
            index = next((i for i, a in enumerate(call.args) if a is expr), None)
            if index is None or any(isinstance(a, ast.Starred) for a in call.args[:index]):
                return
            slot = str(index)
        if isinstance(func, ast.Name):
            owner = self.ctx.names.binding_scope(func)
            targets = owner.bindings.get(func.id, []) if owner is not None else []
            if not targets or LOCAL in targets:
                return  # a def, an assignment or a parameter: not (only) an imported function
            spelled: list[str] = sorted(set(t for t in targets if t is not None))
        else:
            qualified = self.ctx.qualname(func)
            if qualified is None:
                return
            spelled = [qualified]
        found = [handed.get(f"{each}#{slot}") for each in spelled]
        if not all(found):
            return
        kinds = [frozenset(k for k in each or () if not k.startswith(IN)) for each in found]
        common = frozenset.intersection(*kinds)
        if MOVED not in common:
            return
        self.use.elsewhere |= common | frozenset(k for each in found for k in each or () if k.startswith(IN))
        self.use.iterated = True

    def _stored(self, target: ast.expr, depth: int) -> None:
        if isinstance(target, ast.Name):
            for use in self._uses_of(target):
                self._expression(use, depth + 1)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            for attribute in self.ctx.nodes(ast.Attribute):
                assert isinstance(attribute, ast.Attribute)
                if attribute is not target and attribute.attr == target.attr and \
                        isinstance(attribute.value, ast.Name) and attribute.value.id == "self":
                    self._expression(attribute, depth + 1)

    def _uses_of(self, target: ast.Name) -> list[ast.Name]:
        """Reads of the name bound by `target`, in the same scope."""
        ctx = self.ctx
        names = ctx.names
        owner = names.binding_scope(target)
        if owner is None:
            return []
        found = []
        here = ctx.order(target) or 0
        for use in ctx.bound_uses(target.id, owner):
            if use is target:
                continue
            if isinstance(owner.node, ast.Module) or here < (ctx.order(use) or 0):
                found.append(use)  # a global is read by functions defined anywhere
        return found

    def _returned(self, expr: ast.expr, depth: int, position: Union[int, str, None] = None) -> None:
        """Returned from a function (or a Lightning `*_dataloader` hook): follow its callers in the file, and
        for a top-level function, what the modules that import it do with its result (a tuple element by
        its position, a dict value by its key)."""
        ctx = self.ctx
        function = next((a for a in ctx.ancestors(expr) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))),
                        None)
        if function is None:
            return
        if function.name in _LIGHTNING_HOOKS:
            self.use.framework = "lightning"
            self.use.iterated = True
            return
        if ctx.parent(function) is ctx.tree:
            slot = "" if position is None else position if isinstance(position, str) else f"[{position}]"
            found = ctx.project.moved_returns.get(function.name + slot)
            if found:
                self.use.elsewhere |= frozenset(found)
                self.use.iterated = True
        if isinstance(position, str):
            return  # a dict's value: its callers in the file are not followed
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            func = call.func
            called = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "self" else None)
            if called != function.name:
                continue
            if position is None:
                self._expression(call, depth + 1)
                continue
            parent = ctx.parent(call)
            if isinstance(parent, ast.Assign):
                for target in parent.targets:
                    if isinstance(target, (ast.Tuple, ast.List)) and position < len(target.elts):
                        self._stored(_unstarred(target.elts[position]), depth + 1)

    def _into_function(self, func: ast.Name, call: ast.Call, keyword: Optional[str], expr: ast.expr,
                       depth: int) -> None:
        """`train(model, loader, ...)`: the loader is the function's parameter there."""
        ctx = self.ctx
        definition = next((f for f in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef)
                           if f.name == func.id), None)  # type: ignore[attr-defined]
        if definition is None or ctx.names.binding_scope(func) is None:
            return
        assert isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef))
        params = list(definition.args.posonlyargs) + list(definition.args.args)
        if keyword is not None:
            param = next((p for p in params + list(definition.args.kwonlyargs) if p.arg == keyword), None)
        else:
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            position = next((i for i, a in enumerate(positional) if a is expr), None)
            param = params[position] if position is not None and position < len(params) else None
        if param is None:
            return
        self.entered.setdefault(id(definition), []).append(call)
        scope = ctx.names.scopes.get(id(definition))
        for use in ctx.named(param.arg):
            if any(a is definition for a in ctx.ancestors(use)) and ctx.names.binding_scope(use) is scope:
                self._expression(use, depth + 1)

    def _iterator(self, call: ast.Call, depth: int) -> None:
        """`it = iter(loader)`, then `batch = next(it)`."""
        ctx = self.ctx
        parent = ctx.parent(call)
        if isinstance(parent, ast.Assign):
            for target in parent.targets:
                if isinstance(target, ast.Name):
                    for use in self._uses_of(target):
                        outer = _argument_of(ctx, use)
                        if outer is not None and isinstance(outer.func, ast.Name) and outer.func.id == "next":
                            self._next(outer)

    def _next(self, call: ast.Call) -> None:
        """`batch = next(...)`: the batch is read in the statements of the same block after it; or it is
        copied at once (`next(it).to(device)`, `next(it)[0].cuda()`)."""
        self.use.iterated = True
        ctx = self.ctx
        parent = ctx.parent(call)
        if isinstance(parent, ast.Assign):
            self._moves_in(parent.targets[0], [_scope_node(ctx, call)])
            return
        value: ast.expr = call
        while isinstance(parent, ast.Subscript) and parent.value is value:
            value, parent = parent, ctx.parent(parent)
        move = ctx.parent(parent) if isinstance(parent, ast.Attribute) and parent.attr in MOVES else None
        if isinstance(move, ast.Call) and move.func is parent and _to_a_device(ctx, move):
            self.use.moves.append(move)

    def _generator(self, loop: Union[ast.For, ast.AsyncFor], depth: int) -> None:
        """A loop of a generator function the loader was handed to that yields its batches, or parts of
        them, as they are (`def infiniteloop(loader): while True: for x, y in loader: yield x`): the calls
        that handed the loader over hand on its batches; they are followed as the loader is. Only a loop over
        the loader alone (`iter`, `enumerate`, `tqdm` around it; not `zip` with another iterable)."""
        function = _scope_node(self.ctx, loop)
        calls = self.entered.get(id(function), [])
        if not calls:
            return
        source, target = loop.iter, loop.target
        while isinstance(source, ast.Call) and _call_name(source.func) in _COPY_WRAPPERS and source.args:
            if _call_name(source.func) == "enumerate":
                if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2):
                    return
                target = target.elts[1]
            source = source.args[0]
        if isinstance(source, ast.Call):
            return
        batch = _bound(target)
        assigns = [n for n in own_nodes(loop.body) if isinstance(n, ast.Assign)]
        while True:  # `x, y = batch`, `images = batch["image"]`: its parts, not what a call makes of them
            taken = {name for n in assigns if _part_of(n.value, batch) for t in n.targets for name in _bound(t)}
            if taken <= batch:
                break
            batch |= taken
        for node in own_nodes(loop.body):
            value = node.value if isinstance(node, ast.Yield) else None
            parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            if value is not None and all(isinstance(p, ast.Name) and p.id in batch for p in parts):
                for call in calls:
                    self._expression(call, depth + 1)
                return

    def _loop(self, target: ast.expr, body: Union[list[ast.stmt], Optional[ast.AST]]) -> None:
        self.use.iterated = True
        if body is not None:
            self._moves_in(target, body if isinstance(body, list) else [body])

    def _moves_in(self, target: ast.expr, body: list[Any]) -> None:
        batch = {target.id} if isinstance(target, ast.Name) else _bound(target) if isinstance(
            target, (ast.Tuple, ast.List)) else set()
        inside = [n for part in body for n in walk_nodes(part)]
        statements = [n for n in inside if isinstance(n, ast.Assign)]
        comps = [n for n in inside if isinstance(n, ast.comprehension)]
        changed = True
        while changed:  # names taken from the batch: `x, y = batch`, `inputs = batch["x"]`
            changed = False
            for node in statements:
                if _reads(node.value) & batch:
                    for t in node.targets:
                        new = _bound(t) - batch
                        if new:
                            batch |= new
                            changed = True
            for comp in comps:
                if _reads(comp.iter) & batch:
                    new = _bound(comp.target) - batch
                    if new:
                        batch |= new
                        changed = True
        order = self.ctx.order
        calls = sorted((n for n in inside if isinstance(n, ast.Call)), key=lambda n: order(n) or 0)
        for call in calls:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in MOVES and _reads(func.value) & batch \
                    and _to_a_device(self.ctx, call):
                self.use.moves.append(call)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id not in batch and self.ctx.project.handed_methods:
                self._into_method(func, call, batch)

    def _into_method(self, func: ast.Attribute, call: ast.Call, batch: set[str]) -> None:
        """`model.do_pass(data, it)` with `model` bound only to instances of a class of a project module this
        file imports (`model = XMemTrainer(...)`, or `XMemTrainer(...).train()` through a method that returns
        `self`) whose method `do_pass` copies the parameter handed the batch, or its items, to a device
        (ProjectView.handed_methods): those copies are the batch's (XMem's train.py, blind25)."""
        handed = self.ctx.project.handed_methods
        slots: list[str] = []
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred):
                break
            if _part_of(argument, batch):
                slots.append(str(index))
        slots += [k.arg for k in call.keywords if k.arg is not None and _part_of(k.value, batch)]
        if not slots:
            return
        classes = _instance_classes(self.ctx, func.value, handed)  # type: ignore[arg-type]
        if not classes:
            return
        for slot in slots:
            found = [handed.get(f"{each}.{func.attr}#{slot}") for each in classes]
            if not all(found):
                continue
            common = frozenset.intersection(*(frozenset(k for k in each or () if not k.startswith(IN))
                                              for each in found))
            if MOVED in common:
                self.use.elsewhere |= common | frozenset(k for each in found for k in each or () if k.startswith(IN))


def _instance_classes(ctx: AstContext, name: ast.Name, handed: dict[str, tuple[str, ...]]) -> list[str]:
    """The imported classes (as ProjectView.handed_methods spells them) whose instances `name` holds, when every
    binding of it in its scope is a call of one (`model = Trainer(...)`), or of a method of one that returns
    `self` (`Trainer(...).train()`); [] when one binding is anything else (a parameter, another call)."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return []
    targets = owner.bindings.get(name.id, [])
    values = owner.values.get(name.id, [])
    if not values or len(values) != len(targets) or any(t is not None for t in targets):
        return []
    found: list[str] = []
    for value in values:
        chained: list[str] = []
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Call):
            chained.append(value.func.attr)  # `Trainer(...).train()`
            value = value.func.value
        spelled = ctx.qualname(value.func) if isinstance(value, ast.Call) else None
        if spelled is None or any(handed.get(f"{spelled}.{m}") != (RETURNS_SELF,) for m in chained):
            return []
        found.append(spelled)
    return sorted(set(found))


def _part_of(expr: ast.expr, batch: set[str]) -> bool:
    """`batch`, `batch[0]`, `batch["image"]`, `batch.image`: a batch name, or an item or attribute of one."""
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in batch


@dataclass(frozen=True)
class Copies:
    calls: tuple[ast.Call, ...]  # `.to(device)` / `.cuda()` calls that get `non_blocking=True`
    loops: int  # loops over the loader found in this file
    where: tuple[str, ...]  # the functions holding them, for the fix message
    mover: str = ""  # the framework that copies the batches instead: "accelerate", "lightning", ""
    blocking: tuple[ast.Call, ...] = ()  # copies of the batch in those loops that stay blocking after the fix
    loops_found: tuple[Loop, ...] = ()  # the loops over the loader the fix looks in


def asynchronous_after_fix(ctx: AstContext, batches: BatchUse, copies: Copies) -> bool:
    """Every copy of the batches to a device that the file shows is asynchronous once GPU101's fix has run:
    in the loops over the loader, each copy of the batch or a part of it already passes `non_blocking=True`
    or is one the fix gives it to; a move the fix cannot reach (`next(it).to(device)`, a loop over an
    unnamed loader) already asks for it; no copy is left to a framework (Accelerate's default is blocking)
    or to another module (whose copies the fix does not touch). A dtype cast (`.to(weight_dtype)`) is not a
    copy to a device, nor is the copy of a value computed from the batch (`model_input.to(device)`,
    `torch.randn(x.shape).to(x.device)`), which is made where the batch already is."""
    if batches.framework or copies.mover or batches.consumers or copies.blocking \
            or not (batches.moves or copies.calls):
        return False
    inside = {id(loop) for loop in copies.loops_found}
    for move in batches.moves:
        if _non_blocking(move) or any(move is c for c in copies.calls) or not _device_copy(ctx, move):
            continue
        if any(id(a) in inside for a in ctx.ancestors(move)):
            continue  # in a loop the fix looks in, and not a copy of the batch's parts (those are judged above)
        if not _computed(move):
            return False
    return True


def _computed(move: ast.Call) -> bool:
    """The move's receiver is a value computed from the batch by a call (`f(x)`, `x.sum()`), not the batch or
    a part of it (`next(it)`, `Variable(x)` and host casts such as `x.float()` pass the batch on)."""
    assert isinstance(move.func, ast.Attribute)
    receiver = _unshaped(move.func.value)
    while isinstance(receiver, (ast.Subscript, ast.Attribute)):
        receiver = receiver.value
    if not isinstance(receiver, ast.Call):
        return False
    name = _call_name(receiver.func)
    return name not in ("next", "Variable", "float", "half", "double", "long", "int", "bool", "byte", "type")


def _device_copy(ctx: AstContext, call: ast.Call) -> bool:
    """`.cuda()`, or `.to()` whose target is a device or unknown; `.to(torch.float16)`, `.to(weight_dtype)`
    and `.to(dtype=...)` alone are casts on the device the tensor is on."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return True
    target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    if target is None:
        return not all(k.arg == "dtype" for k in call.keywords) or not call.keywords
    return isinstance(target, ast.Starred) or _is_device(ctx, target) or not _dtype_like(ctx, target)


def _dtype_like(ctx: AstContext, expr: ast.expr) -> bool:
    """`torch.float16`, `weight_dtype`, `args.dtype`: a dtype by its qualified or last name."""
    qualified = ctx.qualname(expr) or ""
    if qualified.startswith("torch.") and "device" not in qualified:
        return True
    last = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return "dtype" in last.lower()


def framework_mover(ctx: AstContext, loader: ast.Call) -> str:
    """Who copies the loader's batches when the file does not: Accelerate (`accelerator.prepare(loader)`),
    or Lightning / Fabric (`*_dataloader()` hooks, `fabric.setup_dataloaders(loader)`)."""
    function = _scope_node(ctx, loader)
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and function.name.endswith("_dataloader") \
            and any(isinstance(a, ast.ClassDef) for a in ctx.ancestors(function)):
        return "lightning"
    holder = _holder(ctx, loader)
    if holder is None:
        return ""
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("prepare", "setup_dataloaders") and any(
                _same(ctx, value, holder) for value in _all_arguments(call)):
            return "accelerate" if func.attr == "prepare" else "lightning"
    return ""


def batch_copies(ctx: AstContext, loader: ast.Call, custom_collate: bool) -> Copies:
    """The host-to-device copies of the loader's batches in the loops over it (rewrites/async_copies.py)."""
    loops = _loops_over(ctx, loader)
    calls: list[ast.Call] = []
    where: list[str] = []
    blocking: list[ast.Call] = []
    for loop in loops:
        found = _copies_in(ctx, loop, _names(loop.target), custom_collate)
        for call in found:
            if all(call is not c for c in calls):
                calls.append(call)
        blocking += _left_blocking(ctx, loop, _names(loop.target), found)
        if found:
            function = _scope_node(ctx, loop)
            name = f"{function.name}()" if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else "the module"
            if name not in where:
                where.append(name)
    blocking = [c for c in blocking if all(c is not made for made in calls)]  # another loop's copy may take it
    return Copies(tuple(calls), len(loops), tuple(where), "" if calls else framework_mover(ctx, loader),
                  tuple(blocking), tuple(loops))


def _holder(ctx: AstContext, loader: ast.Call) -> Optional[ast.expr]:
    """The name or `self.x` the loader is assigned to."""
    parent = ctx.parent(loader)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        if isinstance(target, ast.Name) or (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                                            and target.value.id == "self"):
            return target
    if isinstance(parent, ast.AnnAssign) and isinstance(parent.target, (ast.Name, ast.Attribute)):
        return parent.target
    return None


def _class_of(ctx: AstContext, node: ast.AST) -> Optional[ast.ClassDef]:
    return next((a for a in ctx.ancestors(node) if isinstance(a, ast.ClassDef)), None)


def _same(ctx: AstContext, a: ast.expr, b: ast.expr) -> bool:
    """The same variable: one name binding, or `self.x` in the same class."""
    names = ctx.names
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        return a.id == b.id and names.binding_scope(a) is names.binding_scope(b) and names.binding_scope(a) is not None
    if isinstance(a, ast.Attribute) and isinstance(b, ast.Attribute) and isinstance(a.value, ast.Name) \
            and isinstance(b.value, ast.Name) and a.value.id == b.value.id == "self":
        return a.attr == b.attr and _class_of(ctx, a) is _class_of(ctx, b) is not None
    return False


def _unwrapped(expr: ast.expr) -> ast.expr:
    """`enumerate(tqdm(loader))` -> `loader`."""
    while isinstance(expr, ast.Call) and expr.args and not isinstance(expr.args[0], ast.Starred) \
            and _first_in_source(expr) is expr.args[0]:
        if _call_name(expr.func) not in _COPY_WRAPPERS:
            break
        expr = expr.args[0]
    return expr


def _first_in_source(call: ast.Call) -> Optional[ast.AST]:
    """The call's first argument as written (`f(k=1, *a)` writes the keyword first)."""
    first: list[ast.AST] = [*call.args, *call.keywords]
    return min(first, key=lambda n: (n.lineno, n.col_offset)) if first else None  # type: ignore[attr-defined]


def _loops_over(ctx: AstContext, loader: ast.Call) -> list[Loop]:
    holder = _holder(ctx, loader)
    if holder is None:
        return []
    index = ctx.analysis(_LoopIndex)
    if isinstance(holder, ast.Name):  # the same binding, or a parameter it may be passed to
        owner = ctx.names.binding_scope(holder)
        same = index.by_binding.get((holder.id, id(owner)), []) if owner is not None else []
        candidates = sorted({*same, *index.parameters})
    else:
        candidates = index.by_attribute.get(holder.attr, []) if isinstance(holder, ast.Attribute) else []
    loops: list[Loop] = []
    for position in candidates:
        loop, source = index.sources[position]
        if _same(ctx, source, holder):
            loops.append(loop)
        elif isinstance(source, ast.Name) and isinstance(holder, ast.Name) and _passed_in(ctx, source, holder):
            loops.append(loop)
    return loops


class _LoopIndex:
    """Every `for` loop's source, unwrapped (`with` aliases too), grouped by what could match a loader's holder:
    a loop no index names cannot match (see _same and _passed_in), so a loader is no longer checked against
    every loop of the file (quadratic in a file of many training functions)."""

    def __init__(self, ctx: AstContext) -> None:
        self.sources: list[tuple[Loop, ast.expr]] = []
        self.by_binding: dict[tuple[str, int], list[int]] = {}  # a name, and the id of the scope binding it
        self.by_attribute: dict[str, list[int]] = {}  # `self.x`
        self.parameters: list[int] = []  # a kept parameter of a function: a loader may be passed to it
        for position, (loop, source) in enumerate(ctx.analysis(_loop_sources)):
            if isinstance(source, ast.Name):
                source = _with_wrapped(ctx, source)
            self.sources.append((loop, source))
            if isinstance(source, ast.Name):
                owner = ctx.names.binding_scope(source)
                if owner is not None:
                    self.by_binding.setdefault((source.id, id(owner)), []).append(position)
                if _kept_parameter_owner(ctx, source) is not None:
                    self.parameters.append(position)
            elif isinstance(source, ast.Attribute) and isinstance(source.value, ast.Name) \
                    and source.value.id == "self":
                self.by_attribute.setdefault(source.attr, []).append(position)


def _with_wrapped(ctx: AstContext, name: ast.Name) -> ast.expr:
    """What a name bound once by `with tqdm(loader) as progress_bar:` wraps (`loader`, Grad-TTS's train.py);
    the name itself otherwise."""
    owner = ctx.names.binding_scope(name)
    if owner is None or len(owner.bindings.get(name.id, [])) != 1:
        return name
    for statement in ctx.nodes(ast.With, ast.AsyncWith):
        assert isinstance(statement, (ast.With, ast.AsyncWith))
        for item in statement.items:
            bound = item.optional_vars
            if isinstance(bound, ast.Name) and bound.id == name.id and ctx.names.binding_scope(bound) is owner:
                inner = _unwrapped(item.context_expr)
                return inner if inner is not item.context_expr else name
    return name


def _loop_sources(ctx: AstContext) -> list[tuple[Loop, ast.expr]]:
    """Every `for` loop of the file and what it iterates, unwrapped (once per file, not once per loader)."""
    return [(loop, _unwrapped(loop.iter))  # type: ignore[misc, attr-defined]
            for loop in ctx.nodes(ast.For, ast.AsyncFor)]


def _loops_by_source(ctx: AstContext) -> dict[int, Loop]:
    """`_loop_sources` keyed by the id of what each loop iterates (once per file)."""
    return {id(source): loop for loop, source in ctx.analysis(_loop_sources)}


# how many functions deep a loader is followed through the parameters it is passed to
_PASS_DEPTH = 3


def _kept_parameter_owner(ctx: AstContext, parameter: ast.Name) -> Optional[FunctionNode]:
    """The function whose parameter `parameter` is, never rebound there (but to itself wrapped); None otherwise."""
    owner = ctx.names.binding_scope(parameter)
    if owner is None or not isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not kept_parameter(owner.bindings.get(parameter.id), owner.values.get(parameter.id),
                                  _wraps(parameter.id)):
        return None
    return owner.node


def _passed_in(ctx: AstContext, parameter: ast.Name, loader: ast.Name, depth: int = _PASS_DEPTH) -> bool:
    """`parameter` is a parameter of a function that a call in this file passes `loader` to
    (`train(model, train_loader, ...)` -> `def train(model, loader, ...)`), and is never rebound; also
    through a parameter of another such function that hands it on (`get_features(train_loader)` ->
    `def get_features(loader): inference(loader)` -> `def inference(loader)`)."""
    names = ctx.names
    function = _kept_parameter_owner(ctx, parameter)
    if function is None:
        return False
    params = [*function.args.posonlyargs, *function.args.args]
    position = next((i for i, p in enumerate(params) if p.arg == parameter.id), None)
    calls = [c for c in ctx.nodes(ast.Call) if isinstance(c.func, ast.Name)  # type: ignore[attr-defined]
             and c.func.id == function.name and names.binding_scope(c.func) is names.module_scope]  # type: ignore
    if not calls:
        return False
    passes = 0
    for call in calls:
        assert isinstance(call, ast.Call)
        argument: Optional[ast.expr] = next((k.value for k in call.keywords if k.arg == parameter.id), None)
        if argument is None and position is not None:
            # LibCST's positional arguments: `*a` and `**d` included, in the order written
            positional: list[ast.AST] = [*call.args, *(k for k in call.keywords if k.arg is None)]
            if any(isinstance(a, (ast.Starred, ast.keyword)) for a in positional[:position + 1]) \
                    or len(positional) <= position:
                continue
            argument = positional[position]  # type: ignore[assignment]
        if argument is not None and (_same(ctx, argument, loader) or (
                depth > 1 and isinstance(argument, ast.Name)
                and _passed_in(ctx, argument, loader, depth - 1))):
            passes += 1
    return passes > 0


T = TypeVar("T")


def kept_parameter(bindings: Optional[Sequence[Optional[str]]], values: Optional[Sequence[Optional[T]]],
                   wraps_itself: Callable[[T], bool]) -> bool:
    """A parameter keeps the loader it was passed: never rebound, or rebound only to itself wrapped for progress
    (`loader = tqdm(loader)` when this rank prints: vq-vae-2's train(), the same batches). `bindings` and `values`
    are the scope's for the name; `wraps_itself` tells, on the caller's tree, whether a value is such a wrapper."""
    if not bindings or not values or len(bindings) != len(values) or bindings[0] is not None \
            or values[0] is not None:
        return False
    return all(target is None and value is not None and wraps_itself(value)
               for target, value in zip(bindings[1:], values[1:]))


def _wraps(name: str) -> Callable[[ast.expr], bool]:
    def wraps_itself(value: ast.expr) -> bool:
        inner = _unwrapped(value)
        return inner is not value and isinstance(inner, ast.Name) and inner.id == name
    return wraps_itself


def _names(target: ast.expr) -> set[str]:
    """The names a loop target binds: `x, y`, `(i, (x, y))`, `batch`."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for element in target.elts:
            out |= _names(_unstarred(element))
        return out
    return set()


def _base_name(expr: ast.expr) -> Optional[str]:
    """`x` for `x`, `x[0]`, `x["image"]`, `x.images`."""
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _unshaped(expr: ast.expr) -> ast.expr:
    """`images` for `images.reshape(-1, 784)` or `x.view(n, -1).contiguous()` (SHAPE_METHODS)."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SHAPE_METHODS:
        expr = expr.func.value
    return expr


def _chain_base(expr: ast.expr) -> Optional[str]:
    """`x` for `x.sum()`, `x[0].mean()`: the name a chain of calls, attributes and subscripts starts from."""
    while isinstance(expr, (ast.Subscript, ast.Attribute, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _is_device(ctx: AstContext, expr: ast.expr) -> bool:
    """A device, never a dtype nor the CPU: `device`, `args.device`, `"cuda"`, `0`, `x.device`."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes)):
        return isinstance(expr.value, str) and expr.value.split(":")[0] in ("cuda", "xpu")
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return True
    qualified = ctx.qualname(expr) or ""
    if qualified.startswith("torch.") and "device" not in qualified:
        return False  # torch.float16, torch.bfloat16
    if isinstance(expr, ast.Call):
        first = _first_in_source(expr)
        value = first.value if isinstance(first, (ast.keyword, ast.Starred)) else first
        return qualified == "torch.device" and value is not None and _is_device(ctx, value)  # type: ignore[arg-type]
    if isinstance(expr, ast.Constant):
        last = repr(expr.value) if expr.value is None or isinstance(expr.value, bool) else ""
    else:
        last = expr.attr if isinstance(expr, ast.Attribute) else (expr.id if isinstance(expr, ast.Name) else "")
    lowered = last.lower()
    return "dtype" not in lowered and any(word in lowered for word in DEVICE_WORDS)


def _host_to_device(ctx: AstContext, call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or any(k.arg == "non_blocking" for k in call.keywords):
        return False
    starred = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
    if func.attr == "cuda":
        return not starred and len(call.args) + len(call.keywords) <= 1
    if func.attr != "to" or starred:
        return False
    positional = list(call.args)
    target = positional[0] if positional else next((k.value for k in call.keywords if k.arg == "device"), None)
    return target is not None and _is_device(ctx, target) and len(positional) <= 2


def _body_calls(ctx: AstContext, loop: Loop) -> list[ast.Call]:
    """The calls in the loop's body, in source order (asked once per loop: a file of many loops stays linear)."""
    inside = [n for statement in loop.body for n in walk_nodes(statement) if isinstance(n, ast.Call)]
    return sorted(inside, key=lambda call: ctx.order(call) or 0)


def _batch_names(loop: Loop, batch: set[str]) -> set[str]:
    """The loop's names for the batch and its parts: `x, y = batch` / `images = batch["image"]`, names
    unpacked from the batch, carry it on (statements directly in the loop's indented block; a body on the
    `for` line is not one)."""
    names = set(batch)
    if loop.body and loop.body[0].lineno != loop.lineno:
        for statement in loop.body:
            if isinstance(statement, ast.Assign) and _base_name(statement.value) in names \
                    and not isinstance(statement.value, ast.Call):
                for target in statement.targets:
                    names |= _names(target)
    return names


def _left_blocking(ctx: AstContext, loop: Loop, batch: set[str], found: list[ast.Call]) -> list[ast.Call]:
    """The copies of the batch's parts to a device in the loop that stay blocking after the fix: neither
    given `non_blocking=True` by it nor asking for it (a copy read on the host, a collate_fn's batch
    object, `.to(device, dtype)` with more arguments than the fix rewrites, a copy in a comprehension over
    the batch)."""
    names = _batch_names(loop, batch)
    for statement in loop.body:  # `tuple(t.to(device) for t in batch)`, `{k: v.to(device) for k, v in batch.items()}`
        for node in walk_nodes(statement):
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for generator in node.generators:
                    if _chain_base(generator.iter) in names:
                        names |= _names(generator.target)
    left: list[ast.Call] = []
    for call in _body_calls(ctx, loop):
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in MOVES or _non_blocking(call) \
                or any(call is c for c in found) or not _device_copy(ctx, call):
            continue
        if any(isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for a in
               _ancestors_below(ctx, call, loop)):
            continue
        if _base_name(_unshaped(func.value)) in names:
            left.append(call)
    return left


def _copies_in(ctx: AstContext, loop: Loop, batch: set[str], custom_collate: bool) -> list[ast.Call]:
    names = _batch_names(loop, batch)
    found: list[ast.Call] = []
    calls = _body_calls(ctx, loop)
    for call in calls:
        if not _host_to_device(ctx, call):
            continue
        if any(isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for a in
               _ancestors_below(ctx, call, loop)):
            continue
        receiver = call.func.value  # type: ignore[attr-defined]
        if _base_name(_unshaped(receiver)) not in names:
            continue
        if custom_collate and isinstance(receiver, ast.Name) and receiver.id in _whole_batch(loop):
            continue  # a batch a collate_fn built: its own `.to()` may not take non_blocking
        if _read_on_host(ctx, calls, call):
            continue
        found.append(call)
    return found


def _ancestors_below(ctx: AstContext, node: ast.AST, outer: ast.AST) -> list[ast.AST]:
    out = []
    for ancestor in ctx.ancestors(node):
        if ancestor is outer:
            break
        out.append(ancestor)
    return out


def _whole_batch(loop: Loop) -> set[str]:
    """The name a loop binds to a whole batch: `batch` in `for batch in ...` and `for i, batch in
    enumerate(...)`; the parts of an unpacked batch (`for x, y in ...`) are not."""
    target: ast.expr = loop.target
    source = loop.iter
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
            and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
        target = _unstarred(target.elts[1])
    return {target.id} if isinstance(target, ast.Name) else set()


def _read_on_host(ctx: AstContext, calls: list[ast.Call], call: ast.Call) -> bool:
    """The copy's result is read on the host in the loop: `.to(device).item()`, or a name it is
    assigned to later passed to `.item()`, `.tolist()`, `.numpy()`, `.cpu()` or `print()`."""
    parent = ctx.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr in _HOST_READS:
        return True
    assigned: set[str] = set()
    if isinstance(parent, ast.Assign):
        for target in parent.targets:
            assigned |= _names(target)
    elif isinstance(parent, ast.Tuple):  # `x, y = x.to(device), y.to(device)`
        assign = ctx.parent(parent)
        if isinstance(assign, ast.Assign) and assign.value is parent and len(assign.targets) == 1:
            destination = assign.targets[0]
            index = next(i for i, e in enumerate(parent.elts) if e is call)
            if isinstance(destination, (ast.Tuple, ast.List)) and index < len(destination.elts):
                assigned = _names(_unstarred(destination.elts[index]))
    if not assigned:
        return False
    here = ctx.order(call) or 0
    for other in calls:  # the calls of the loop's body
        if not here < (ctx.order(other) or 0):
            continue
        func = other.func
        if isinstance(func, ast.Attribute) and func.attr in _HOST_READS and _chain_base(func.value) in assigned:
            return True
        if isinstance(func, ast.Name) and func.id in _HOST_FUNCTIONS and any(
                _chain_base(value) in assigned for value in _all_arguments(other)):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# one pass over a small benchmark held in memory (GPU101, GPU102)

_LOOP_SCOPES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

# the most batches a loop may draw before its `break` for the loader to count as drawn for a few items
FEW_BATCHES = 4
MANY_BATCHES = Premise(
    "many-batches",
    "the loader is drawn from enough for its loading to matter: refuted for one pass over a small torchvision "
    "benchmark held in memory (MNIST and its variants, CIFAR-10/100, SVHN, USPS: at most 73,257 images of "
    "16-32 px): a loader bound to a name at a script's top level (or in its `__main__` block) in a file no "
    "project file imports, iterated by one loop that sits in no other loop or function and runs under "
    "`torch.no_grad()` (or `inference_mode()`), its name used otherwise only in `len()` or to read its "
    "`.dataset`. That is the evaluation pass after training, whose few "
    "seconds of loading in all neither workers (which cost about as much to start) nor pinned copies win "
    "back. Refuted too for a loader bound to a name whose every use is a loop that breaks after at most "
    f"{FEW_BATCHES} batches (`if count == num_examples: break`, the bound a literal or a parameter's literal "
    "default no call in the file overrides), `len()`, or a hand-over to such a loop: a function of the file "
    "it is passed to, or the unpacking of a function of the file that returns it; forking workers to serve "
    "two items costs more than it saves. Any other loader, or a dataset built from something else, is shown.")


def draws_few_batches(ctx: AstContext, loader: "LoaderCall") -> bool:
    """MANY_BATCHES is refuted for this DataLoader call (see the premise)."""
    if _drawn_for_a_few(ctx, loader.node):
        return True
    if ctx.project.imported:
        return False
    for each in loader.alternatives():
        dataset = each.dataset
        name = ctx.qualname(dataset.func) if isinstance(dataset, ast.Call) else None
        if name is None or not name.startswith("torchvision.datasets.") \
                or name.rsplit(".", 1)[-1] not in SMALL_IMAGE_SETS:
            return False
    statement = ctx.parent(loader.node)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return False
    if any(isinstance(a, _LOOP_SCOPES) for a in ctx.ancestors(statement)):
        return False  # built in a function or a loop: it may be drawn from again
    target = statement.targets[0]
    loops = 0
    for use in ctx.named(target.id):
        if use is target:
            continue
        if not isinstance(use.ctx, ast.Load) or ctx.names.binding_scope(use) is not ctx.names.module_scope:
            return False
        parent = ctx.parent(use)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len" \
                and parent.args == [use]:
            continue
        if isinstance(parent, ast.Attribute) and parent.attr in ("dataset", "batch_size"):
            continue  # `len(test_loader.dataset)`: reads no batch
        loop = ctx.analysis(_loops_by_source).get(id(use))
        if loop is None or any(isinstance(a, _LOOP_SCOPES) for a in ctx.ancestors(loop)) \
                or not _under_grad_off(ctx, loop):
            return False
        loops += 1
    return loops == 1


def _drawn_for_a_few(ctx: AstContext, loader: ast.Call) -> bool:
    """Every loop over the loader breaks after at most FEW_BATCHES batches: `if count == num_examples: break` with
    `num_examples=2` a default no call overrides (pytorch-transformer's validation, blind9)."""
    return _only_looped(ctx, loader, lambda loop: _breaks_within(ctx, loop, FEW_BATCHES))


def _only_looped(ctx: AstContext, loader: ast.Call, accepts: Callable[[Loop], bool]) -> bool:
    """The loader, bound to a name, is only iterated (where it is bound, in a function of the file it is passed
    to, or where a function of the file that returns it is called and unpacked), by loops that `accepts`."""
    holder = _holder(ctx, loader)
    return isinstance(holder, ast.Name) and _loops_through(ctx, holder.id, ctx.names.binding_scope(holder), 0,
                                                           accepts)


def _loops_through(ctx: AstContext, name: str, scope: object, depth: int, accepts: Callable[[Loop], bool]) -> bool:
    """Every read of `name` in `scope` is a loop that `accepts`, `len()`, or hands it on to where it is
    (recursively) so; at least one loop."""
    names = ctx.names
    if scope is None or depth > 3:
        return False
    loops = ctx.analysis(_loops_by_source)
    found = False
    for use in ctx.bound_uses(name, scope):  # type: ignore[arg-type]
        if not isinstance(use.ctx, ast.Load):
            continue
        parent = ctx.parent(use)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len":
            continue
        if id(use) in loops:
            if not accepts(loops[id(use)]):
                return False
        elif isinstance(parent, (ast.Call, ast.keyword)):
            parameter = _parameter_of(ctx, use)
            if parameter is None or not _loops_through(ctx, *parameter, depth + 1, accepts):
                return False
        elif isinstance(parent, ast.Tuple) and isinstance(ctx.parent(parent), ast.Return):
            unpacked = _unpacked_results(ctx, parent, use)
            if not unpacked or not all(_loops_through(ctx, each.id, names.binding_scope(each), depth + 1, accepts)
                                       for each in unpacked):
                return False
        else:
            return False
        found = True
    return found


def _parameter_of(ctx: AstContext, use: ast.Name) -> Optional[tuple[str, object]]:
    """The parameter `use` is passed to, of a module-level function of this file (`run_validation(model,
    val_loader, ...)`), with the function's scope, or None."""
    call = ctx.parent(use)
    keyword = call.arg if isinstance(call, ast.keyword) else None
    if isinstance(call, ast.keyword):
        call = ctx.parent(call)
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    function = next((s for s in ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == call.func.id), None)
    if function is None:
        return None
    params = [*function.args.posonlyargs, *function.args.args]
    if keyword is None:
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        position = next((i for i, a in enumerate(call.args) if a is use), None)
        name = params[position].arg if position is not None and position < len(params) else None
    else:
        name = keyword
    scope = ctx.names.scopes.get(id(function))
    return (name, scope) if name and scope is not None else None


def _unpacked_results(ctx: AstContext, returned: ast.Tuple, use: ast.Name) -> list[ast.Name]:
    """Where the module-level function returning `returned` is called and its result unpacked, the names that
    receive `use`'s element (`train_dl, val_dl, ... = get_ds(config)`)."""
    function = next((a for a in ctx.ancestors(returned) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))),
                    None)
    if function is None or not any(function is s for s in ctx.tree.body):
        return []
    position = next(i for i, e in enumerate(returned.elts) if e is use)
    found: list[ast.Name] = []
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Name) and call.func.id == function.name):
            continue
        statement = ctx.parent(call)
        target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 else None
        if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(returned.elts)
                and isinstance(target.elts[position], ast.Name)):
            return []  # a call whose result goes somewhere this does not follow
        found.append(target.elts[position])  # type: ignore[arg-type]
    return found


def _breaks_within(ctx: AstContext, loop: Loop, limit: int) -> bool:
    """The loop's body holds `if <n> == <bound>: ... break` (or `>=`, `>`) with a bound of at most `limit`: a
    literal, or a parameter of its function whose literal default no call of the function in this file
    overrides. Remembered per loop and limit (GPU101 and GPU102 ask it of the same loops)."""
    known = ctx.analysis(_early_breaks)
    breaks = known.get((id(loop), limit))
    if breaks is None:
        breaks = known[(id(loop), limit)] = _breaks_early(ctx, loop, limit)
    return breaks


def _early_breaks(ctx: AstContext) -> dict[tuple[int, int], bool]:
    """The file's answers of _breaks_within, by the id of the loop and the limit (filled as they are asked)."""
    return {}


def _breaks_early(ctx: AstContext, loop: Loop, limit: int) -> bool:
    pending: list[ast.AST] = list(loop.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                             ast.ClassDef)):
            continue  # a break there ends another loop
        if isinstance(node, ast.If) and any(isinstance(s, ast.Break) for s in node.body):
            bound = _compared_bound(ctx, node.test, loop)
            if bound is not None and bound <= limit:
                return True
        pending.extend(child_nodes(node))
    return False


def _compared_bound(ctx: AstContext, test: ast.expr, loop: Loop) -> Optional[int]:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt))
            and isinstance(test.left, ast.Name)):
        return None
    bound = test.comparators[0]
    if isinstance(bound, ast.Constant) and type(bound.value) is int:
        return bound.value + (1 if isinstance(test.ops[0], ast.Gt) else 0)
    if not isinstance(bound, ast.Name):
        return None
    function = next((a for a in ctx.ancestors(loop) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None or ctx.names.binding_scope(bound) is not ctx.names.scopes.get(id(function)):
        return None
    params = [*function.args.posonlyargs, *function.args.args]
    defaults = dict(zip([p.arg for p in params][len(params) - len(function.args.defaults):], function.args.defaults))
    default = defaults.get(bound.id)
    if not (isinstance(default, ast.Constant) and type(default.value) is int):
        return None
    position = next(i for i, p in enumerate(params) if p.arg == bound.id)
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if isinstance(call.func, ast.Name) and call.func.id == function.name and (
                len(call.args) > position or any(isinstance(a, ast.Starred) for a in call.args)
                or any(k.arg in (bound.id, None) for k in call.keywords)):
            return None  # a call passes the bound (or may, through `*args`/`**kwargs`)
    return default.value + (1 if isinstance(test.ops[0], ast.Gt) else 0)


def _under_grad_off(ctx: AstContext, loop: Loop) -> bool:
    """The loop runs in a `with torch.no_grad():` (or `inference_mode()`) block: an evaluation pass."""
    for ancestor in ctx.ancestors(loop):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
                isinstance(item.context_expr, ast.Call) and ctx.qualname(item.context_expr.func) in GRAD_OFF
                for item in ancestor.items):
            return True
    return False

# ---------------------------------------------------------------------------------------------
# a fresh iterator for every batch: `next(iter(loader))` (GPU102)

MANY_PER_ITERATOR = Premise(
    "many-batches-per-iterator",
    "each iterator the loader makes yields more than one batch, so that the worker processes started for it serve "
    "many: refuted for a DataLoader bound to a name (in a function, in a `__main__` block, or at the top level of a "
    "script or notebook no project file imports) whose every read, where it is bound or in a function nested there, "
    "is `next(iter(name))` (also with a default, or `iter(name).__next__()`) or `len(name)`. Each `iter()` starts "
    "the workers again, and the one batch taken from them waits for their start: slower than loading it in the "
    "training process (a training loop drawing `next(iter(training_loader))` every step, a loader drawn once for a "
    "figure; blind18: pytorch-vq-vae's notebook). A loader also iterated by a `for` loop, kept in an iterator "
    "(`batches = iter(loader)`), stored, returned, passed on, bound twice or used through another name is shown.")


def one_batch_per_iterator(ctx: AstContext, loader: ast.Call) -> bool:
    """MANY_PER_ITERATOR is refuted for this DataLoader call: every read of the name it is bound to draws one
    batch from a fresh iterator, or counts batches (see the premise)."""
    holder = _holder(ctx, loader)
    if not isinstance(holder, ast.Name):
        return False
    names = ctx.names
    scope = names.binding_scope(holder)
    if scope is None or scope.is_class or len(scope.bindings.get(holder.id, ())) != 1:
        return False  # a class attribute, or a name bound again (another loader, a loop variable, an import)
    if scope is names.module_scope and ctx.project.imported \
            and not in_main_block(ctx.tree, holder, ctx.parent):
        return False  # a module-level name other files may import and iterate
    uses = [n for n in ctx.bound_uses(holder.id, scope) if n is not holder]
    return bool(uses) and all(_first_batch(ctx, n) or _counts(ctx, n) for n in uses)


def _builtin_call(ctx: AstContext, node: Optional[ast.AST], name: str, argument: ast.AST) -> bool:
    """`node` is `name(argument)` (`next(argument, default)` too), `name` the builtin (the file binds no such
    name)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
            and ctx.names.binding_scope(node.func) is None and node.args and node.args[0] is argument
            and not node.keywords):
        return False
    return len(node.args) == 1 or (name == "next" and len(node.args) == 2 and not isinstance(node.args[1], ast.Starred))


def _first_batch(ctx: AstContext, use: ast.Name) -> bool:
    """`next(iter(use))` or `iter(use).__next__()`: one batch from an iterator nothing keeps."""
    if not isinstance(use.ctx, ast.Load):
        return False
    made = ctx.parent(use)
    if made is None or not _builtin_call(ctx, made, "iter", use):
        return False
    above = ctx.parent(made)
    if _builtin_call(ctx, above, "next", made):
        return True
    call = ctx.parent(above) if isinstance(above, ast.Attribute) and above.attr == "__next__" else None
    return isinstance(call, ast.Call) and call.func is above and not call.args and not call.keywords


def _counts(ctx: AstContext, use: ast.Name) -> bool:
    """`len(use)`: counts batches, draws none."""
    return isinstance(use.ctx, ast.Load) and _builtin_call(ctx, ctx.parent(use), "len", use)



# ---------------------------------------------------------------------------------------------
# loops a person paces: an interactive viewer (GPU101-GPU104)

# calls that return only when a person answers (a key, a click, a line typed, a window closed), by qualified name
_KEY_WAITS = frozenset({"cv2.waitKey", "cv2.waitKeyEx"})  # waitKey(delay=0): forever at a delay <= 0
_CLICK_WAITS = frozenset({"matplotlib.pyplot.waitforbuttonpress"})  # (timeout=-1): forever at a timeout <= 0
_FIGURE_SHOWS = frozenset({"matplotlib.pyplot.show"})  # blocks till its windows close, unless told or interactive
# calls after which show() may return at once: interactive mode, or a backend that draws to no window
_SHOW_RETURNS = frozenset({"matplotlib.pyplot.ion", "matplotlib.pyplot.interactive", "matplotlib.interactive",
                           "matplotlib.use", "matplotlib.pyplot.switch_backend"})
_PROMPTS = frozenset({"input", "raw_input"})  # the builtins, where the file binds no such name
_WAIT_DEPTH = 2  # functions of the file a loop's body calls, and the ones they call, are read; no further

PERSON_WAITS = (
    "a call that returns only when a person answers: `cv2.waitKey(0)` or `cv2.waitKey()` (a delay of zero or "
    "less; `waitKey(1)`, a frame pump, does not count), `input(...)`, `plt.waitforbuttonpress()` (no timeout, or "
    "one of zero or less) or a blocking `plt.show()` (not `block=False`, not in a notebook, not in a file that "
    "calls `plt.ion()`, `interactive()`, `matplotlib.use()` or `switch_backend()`); never `plt.pause()`, which "
    "returns on a timer. Names are resolved through the file's imports (`import cv2 as cv`, `from matplotlib "
    "import pyplot as plt`). The call counts when every pass reaches it: a statement of the loop's body, also "
    "inside a `with` or `try` block, in an `if`'s test or in both its branches, or such a statement of a "
    f"function of the file the body calls ({_WAIT_DEPTH} levels deep), with no `continue` (or `return`, in the "
    "function) before it that could pass it over")
UNATTENDED = Premise(
    "unattended",
    "the loop over the loader runs unattended, so that the speed of loading and copying its batches matters: "
    "refuted for an interactive viewer, a loader bound to a name whose every use is a loop that waits for a "
    "person on every batch, `len()`, or a hand-over to such a loop (a function of the file it is passed to, or "
    "the unpacking of a function of the file that returns it). A loop waits for a person when its body makes "
    f"{PERSON_WAITS}. A key press, not the loader, paces each batch of `cv2.imshow(...)` then `cv2.waitKey(0)` "
    "(pytorch-retinanet's visualize.py, blind10). A loader any other loop also iterates (a training loop) is "
    "shown.")


def paced_by_a_person(ctx: AstContext, loader: ast.Call) -> bool:
    """UNATTENDED is refuted for this DataLoader call: every loop over it waits for a person (see the premise)."""
    return _only_looped(ctx, loader, lambda loop: waits_for_a_person(ctx, loop))


def waits_for_a_person(ctx: AstContext, loop: Loop) -> bool:
    """Every pass of the loop's body blocks on a person (PERSON_WAITS): `cv2.imshow(...); cv2.waitKey(0)`.
    Remembered per loop: several rules ask it of every loop over every loader."""
    known = ctx.analysis(_person_waits)
    waits = known.get(id(loop))
    if waits is None:
        waits = known[id(loop)] = _statements_wait(ctx, loop.body, (ast.Continue,), 0, frozenset())
    return waits


def _person_waits(ctx: AstContext) -> dict[int, bool]:
    """The file's answers of waits_for_a_person, by the id of the loop (filled as they are asked)."""
    return {}


def _statements_wait(ctx: AstContext, body: list[ast.stmt], skips: tuple[type, ...], depth: int,
                     seen: frozenset[int]) -> bool:
    """Statements run in order reach a wait before anything of the `skips` kinds could pass it over (`continue`
    in a loop's body, `return` in a function's); a `break` or `return` that leaves the loop draws no batch."""
    for statement in body:
        if _statement_waits(ctx, statement, skips, depth, seen):
            return True
        if _jumps(statement, skips):
            return False
    return False


def _jumps(statement: ast.stmt, skips: tuple[type, ...]) -> bool:
    """The statement holds a jump of these kinds of its own (not one of a nested loop or function)."""
    # a nested loop's `continue` is its own, but its `return` still leaves the function
    barriers = _SCOPE_NODES if ast.Return in skips else (ast.For, ast.AsyncFor, ast.While, *_SCOPE_NODES)
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, skips):
            return True
        pending.extend(child for child in child_nodes(node) if not isinstance(child, barriers))
    return False


def _statement_waits(ctx: AstContext, statement: ast.stmt, skips: tuple[type, ...], depth: int,
                     seen: frozenset[int]) -> bool:
    """The statement reaches a wait whenever it runs."""
    if isinstance(statement, ast.If):
        return _expression_waits(ctx, statement.test, depth, seen) or (
            bool(statement.orelse) and _statements_wait(ctx, statement.body, skips, depth, seen)
            and _statements_wait(ctx, statement.orelse, skips, depth, seen))
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return any(_expression_waits(ctx, item.context_expr, depth, seen) for item in statement.items) \
            or _statements_wait(ctx, statement.body, skips, depth, seen)
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        body, final = statement.body, statement.finalbody  # type: ignore[attr-defined]
        return _statements_wait(ctx, body, skips, depth, seen) or _statements_wait(ctx, final, skips, depth, seen)
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return _expression_waits(ctx, statement.iter, depth, seen)  # its body may run no time
    if isinstance(statement, ast.While):
        return _expression_waits(ctx, statement.test, depth, seen)
    if isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        return statement.value is not None and _expression_waits(ctx, statement.value, depth, seen)
    return False


def _expression_waits(ctx: AstContext, expr: ast.expr, depth: int, seen: frozenset[int]) -> bool:
    """The expression always makes a waiting call, or a call of a function of the file whose body always waits
    (not in a lambda, a comprehension, a branch of `a if c else b`, or after the first operand of `and`/`or`)."""
    pending: list[ast.AST] = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.IfExp):
            pending.append(node.test)
            continue
        if isinstance(node, ast.BoolOp):
            pending.append(node.values[0])
            continue
        if isinstance(node, ast.Call) and (_asks_a_person(ctx, node) or _calls_a_wait(ctx, node, depth, seen)):
            return True
        pending.extend(child_nodes(node))
    return False


def _calls_a_wait(ctx: AstContext, call: ast.Call, depth: int, seen: frozenset[int]) -> bool:
    """`show(image)` where `show` is a plain function of the file (not a generator) whose body always waits."""
    if depth >= _WAIT_DEPTH:
        return False
    function = local_definition(ctx, call.func, call)
    if not isinstance(function, ast.FunctionDef) or id(function) in seen or any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(function.body)):
        return False
    return _statements_wait(ctx, function.body, (ast.Return,), depth + 1, seen | {id(function)})


def _asks_a_person(ctx: AstContext, call: ast.Call) -> bool:
    """A call that returns only when a person answers (PERSON_WAITS)."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _PROMPTS and ctx.names.binding_scope(func) is None \
            and ctx.qualname(func) is None:
        return True  # the builtin `input()`
    name = ctx.qualname(func)
    if name in _KEY_WAITS:
        return _forever(call, "delay")
    if name in _CLICK_WAITS:
        return _forever(call, "timeout")
    if name in _FIGURE_SHOWS:  # blocking: no argument but `block=True` or `block=None` (the default)
        return not call.args and all(k.arg == "block" and is_literal(ctx, k.value, "True", "None")
                                     for k in call.keywords) \
            and ctx.path.suffix != ".ipynb" and not ctx.analysis(_show_may_return)
    return False


def _forever(call: ast.Call, keyword: str) -> bool:
    """The call's one argument, its first or `keyword`, is absent or a literal of zero or less: no time limit."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg != keyword for k in call.keywords) \
            or len(call.args) + len(call.keywords) > 1:
        return False
    if not call.args and not call.keywords:
        return True
    value = _number(call.args[0] if call.args else call.keywords[0].value)
    return value is not None and value <= 0


def _number(expr: ast.expr) -> Optional[float]:
    """A literal number's value (`-1` included; not a bool), else None."""
    sign = 1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        sign, expr = -1, expr.operand
    value = expr.value if isinstance(expr, ast.Constant) else None
    return sign * value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _show_may_return(ctx: AstContext) -> bool:
    """The file turns interactive mode on or picks a backend: `plt.show()` may return without a person (once per
    file)."""
    return any(isinstance(call, ast.Call) and ctx.qualname(call.func) in _SHOW_RETURNS for call in ctx.nodes(ast.Call))


def _spread(call: ast.Call) -> bool:
    """The call spreads `*args` or `**kwargs`: which argument lands on which parameter is not visible."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _passed(call: ast.Call, entry: str) -> Optional[ast.expr]:
    """What `call` passes for a constructor parameter recorded as "<position>:<name>" (ClassFacts), by keyword or
    by position; None when it passes nothing there."""
    position, _, name = entry.partition(":")
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    index = int(position)
    return call.args[index] if 0 <= index < len(call.args) else None
