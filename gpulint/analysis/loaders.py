"""DataLoader calls on CPython's `ast` (issue 25): the dataset behind a loader, and what each item costs.

The `ast` port of analysis/datasets.py (which the LibCST rules keep using until they are ported):
whether the dataset holds tensors already on a device, items computed up front, or work done per item,
read from the call, the names it is built from, and the project's dataset classes (the kinds are the
project facts' own: project/facts.py IN_MEMORY, NOTHING, ON_DEVICE, WORK). Shared by GPU102 (and GPU101
once ported); other loader rules import it.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property
from typing import Optional, Union

from gpulint.analysis.ast_context import AstContext, AstKeywordArgs, positional_args
from gpulint.analysis.ast_values import self_attribute_value, single_value, value_at
from gpulint.core.torch_api import (
    DATALOADER,
    DATALOADER_DATASET,
    DATASET_SPLITS,
    DATASET_WRAPPERS,
    TENSOR_DATASET,
)
from gpulint.project.facts import IN_MEMORY, NOTHING, ON_DEVICE, ClassFacts

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


def local_definitions(ctx: AstContext) -> dict[str, list[Definition]]:
    """Every def and class statement of the file, by name (any scope)."""
    found: dict[str, list[Definition]] = {}
    for node in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        found.setdefault(node.name, []).append(node)
    return found


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
    stores = {id(n.target) for n in ast.walk(expr) if isinstance(n, ast.NamedExpr)}
    return [n for n in ast.walk(expr) if isinstance(n, ast.Name) and id(n) not in stores]


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
        pending.extend(ast.iter_child_nodes(node))
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
                expr = value_at(ctx, expr)
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
                if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
                    first = _unstarred(first.elts[0])  # ConcatDataset([a, b]): judged by its first part
                expr = first
            else:
                return expr
        return expr

    def _returned_by(self, call: ast.Call) -> Optional[ast.expr]:
        """The one value a function of this file returns (a dataset factory), when `call` calls one that
        is not a class: `make_dataset(...)`, or a method through `self.make_dataset(...)`."""
        definition = self._local_definition(call.func)
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        values = [r.value for r in _returns(definition, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                          ast.Lambda))]
        return values[0] if len(values) == 1 and values[0] is not None else None

    def _local_definition(self, func: ast.expr) -> Optional[Definition]:
        """The def or class statement of this file that `func` names (any scope), or a method of the
        enclosing class for `self.<name>`."""
        ctx = self.ctx
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
            cls = next((a for a in ctx.ancestors(self.node) if isinstance(a, ast.ClassDef)), None)
            if cls is None:
                return None
            found = [d for d in index.get(func.attr, []) if ctx.parent(d) is cls
                     and isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
            return found[0] if len(found) == 1 else None
        return None

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
            definition = self._local_definition(func)  # a class defined inside a function or a method
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
        if any(isinstance(a, ast.Starred) for a in dataset.args) or any(k.arg is None for k in dataset.keywords):
            return True  # `*args`/`**kwargs`: which argument lands where is not visible
        positional = list(dataset.args)
        keywords = {k.arg: k.value for k in dataset.keywords if k.arg is not None}
        for entry in found.passed_arguments:
            position, _, name = entry.partition(":")
            index = int(position)
            value = keywords.get(name)
            if value is None and 0 <= index < len(positional):
                value = positional[index]
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
        found = self.dataset_class
        if found is not None and found.dataset is not None:
            return found.dataset
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
        definition = self._local_definition(collate)
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
            return found.bulk
        dataset = self.dataset
        while isinstance(dataset, ast.Subscript):
            dataset = dataset.value
        if isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Attribute) \
                and dataset.func.attr in ("with_transform", "set_transform"):
            return True
        if isinstance(dataset, ast.Name):
            dataset = single_value(dataset, self.ctx.names)
        return isinstance(dataset, ast.Call) and (self.ctx.qualname(dataset.func) or "").startswith(
            "torchvision.datasets.")

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
