"""What a DataLoader call loads: the dataset behind it, and what each item costs to make.

Shared by the DataLoader rules (GPU101 pinned memory, GPU102 worker processes): whether the
dataset holds tensors already on a device, items that are computed up front, or work done per
item, read from the call, the names it is built from, and the project's dataset classes.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Optional

import libcst as cst

from gpulint.analysis.training import training_facts
from gpulint.core.arguments import KeywordArgs, positional_args
from gpulint.core.context import FileContext
from gpulint.core.names import NameTable, NameUses
from gpulint.core.values import self_attribute_value, single_value, string_value
from gpulint.core.walk import walk
from gpulint.project.facts import IN_MEMORY, NOTHING, ON_DEVICE, ClassFacts

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# what the DataLoader rules need, as `Rule.needles` and `Rule.ast_needles`
DATALOADER_NEEDLES = ("DataLoader",)
DATALOADER_AST_NEEDLES = (tuple(sorted(DATALOADER)),)
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})

_ON_DEVICE = re.compile(r"\.cuda\(|\.to\(|device\s*=")
# torch wrappers whose items are their first argument's items
_WRAPPERS = frozenset({
    "torch.utils.data.Subset", "torch.utils.data.dataset.Subset",
    "torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset",
})
_SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})
_DATAPIPES = ("torchtext.datasets.", "torchdata.datapipes.")
# datasets these libraries build hold CPU data (PIL images, NumPy, Arrow): pinning cannot raise
_CPU_LIBRARIES = ("torchvision.datasets.", "datasets.load_dataset", "datasets.load_from_disk", "datasets.Dataset.")
_CPU_DATASET_METHODS = frozenset({"with_transform", "set_transform", "map", "select", "shuffle", "filter",
                                  "rename_column", "remove_columns", "with_format", "train_test_split"})
UNSHARDED = "unsharded-iterable"


def _first_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    positional = positional_args(call) or []
    if positional:
        return positional[0]
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dataset"), None)


def _preprocessed_rows(dataset: cst.BaseExpression, names: NameTable) -> bool:
    """`tokenized["train"]` where `tokenized = raw.map(tokenize, ...)` (then perhaps `.select(...)`):
    rows computed up front, no per-item transform."""
    methods: set[str] = set()
    pending: list[cst.BaseExpression] = [dataset]
    seen: set[int] = set()
    while pending and len(seen) < 16:
        expr = pending.pop()
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        if isinstance(expr, cst.Name):
            owner = names.binding_scope(expr)
            if owner is not None:
                pending.extend(v for v in owner.values.get(expr.value, []) if v is not None)
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            methods.add(expr.func.attr.value)
            pending.append(expr.func.value)  # `ds.map(f).select(...)`: the receiver's history too
    return "map" in methods and not {"with_transform", "set_transform"} & methods




def local_definitions(ctx: FileContext) -> dict[str, list[cst.CSTNode]]:
    """Every def and class statement of the file, by name (any scope)."""
    found: dict[str, list[cst.CSTNode]] = {}

    class _Defs(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.setdefault(node.name.value, []).append(node)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.setdefault(node.name.value, []).append(node)

    walk(ctx.module, _Defs())
    return found


def qualname_of(ctx: FileContext, definition: cst.CSTNode) -> str:
    """A class's `__qualname__` as the project facts key it: `train.<locals>.Frames`, `Outer.Inner`."""
    facts = ctx.analysis(training_facts)
    parts: list[str] = [definition.name.value]  # type: ignore[attr-defined]
    for ancestor in facts.ancestors(definition):
        if isinstance(ancestor, cst.FunctionDef):
            parts.append(f"{ancestor.name.value}.<locals>")
        elif isinstance(ancestor, cst.ClassDef):
            parts.append(ancestor.name.value)
    return ".".join(reversed(parts))


_INDEX_NAMES = re.compile(r"(?:^|_)(?:idx|idxs|index|indices|ids|perm|nodes|node_ids)$", re.IGNORECASE)


def _indexes(dataset: cst.BaseExpression, ctx: FileContext) -> bool:
    """A dataset of integers: `range(n)`, `list(range(n))`, `torch.arange(n)`, `train_idx.tolist()`."""
    if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name) and dataset.func.value == "list" \
            and len(dataset.args) == 1:
        dataset = dataset.args[0].value
    if not isinstance(dataset, cst.Call):
        return False
    func = dataset.func
    if isinstance(func, cst.Name) and func.value == "range" and ctx.names.binding_scope(func) is None:
        return True
    if ctx.qualname(func) in ("torch.arange", "numpy.arange", "torch.randperm", "numpy.random.permutation"):
        return True
    if isinstance(func, cst.Attribute) and func.attr.value == "tolist":
        receiver = func.value
        name = receiver.value if isinstance(receiver, cst.Name) else (
            receiver.attr.value if isinstance(receiver, cst.Attribute) else "")
        return bool(_INDEX_NAMES.search(name))
    return False


def _text_only(expr: cst.BaseExpression, function: Optional[cst.FunctionDef] = None) -> bool:
    """Strings, f-strings, lists/tuples/dicts of them, or a list of a parameter's string fields
    (`[item["prompt"] for item in batch]`, `[p for p, _ in batch]`): no tensor."""
    if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(_text_only(e.value, function) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return bool(expr.elements) and all(isinstance(e, cst.DictElement) and _text_only(e.value, function)
                                           for e in expr.elements)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "join" \
            and isinstance(expr.func.value, cst.SimpleString):
        return True
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        element = expr.elt
        # `[x["text"] for x in batch]`: a field of each item named like text
        while isinstance(element, cst.Subscript):
            key = element.slice[0].slice
            if isinstance(key, cst.Index) and (string_value(key.value) or "").lower() in _TEXT_FIELDS:
                return True
            element = element.value
        if isinstance(element, cst.Attribute) and element.attr.value.lower() in _TEXT_FIELDS:
            return True
    return False


_TEXT_FIELDS = frozenset({"prompt", "prompts", "text", "texts", "caption", "captions", "sentence", "question",
                          "instruction", "query", "string", "name", "path", "filename", "label_name"})


def dataloader_call(ctx: FileContext, node: cst.Call) -> Optional["LoaderCall"]:
    """A torch DataLoader call whose arguments we can see completely, else None."""
    if ctx.qualname(node.func) not in DATALOADER:
        return None
    if _one_batch(ctx, node):
        return None  # `next(iter(DataLoader(...)))`: one batch, then the loader is gone
    kwargs = ctx.kwargs(node)
    if not kwargs.complete or positional_args(node) is None:
        return None
    return LoaderCall(ctx, node, kwargs)


def _one_batch(ctx: FileContext, node: cst.Call) -> bool:
    facts = ctx.analysis(training_facts)
    arg = facts.parent(node)
    holder = facts.parent(arg) if arg is not None else None  # Arg -> Call
    if not (isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) and holder.func.value == "iter"):
        return False
    outer_arg = facts.parent(holder)
    outer = facts.parent(outer_arg) if outer_arg is not None else None
    return isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) and outer.func.value == "next"


def _constant(expr: cst.BaseExpression) -> bool:
    """A literal number, string, bool or None: never a tensor."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, (cst.Integer, cst.Float)):
        return True  # -1
    return isinstance(expr, cst.Name) and expr.value in ("None", "True", "False")


class LoaderCall:
    """One DataLoader call and what gpulint can tell about the dataset it loads from."""

    def __init__(self, ctx: FileContext, node: cst.Call, kwargs: KeywordArgs,
                 start: Optional[cst.BaseExpression] = None) -> None:
        self.ctx = ctx
        self.node = node
        self.kwargs = kwargs
        self.start = start  # one of several values the dataset argument may hold (see `alternatives`)

    @cached_property
    def argument(self) -> Optional[cst.BaseExpression]:
        """The dataset argument as written in the call."""
        if self.kwargs.has("dataset"):
            return self.kwargs.get("dataset")
        positional = positional_args(self.node) or []
        return positional[0] if positional else None

    def alternatives(self) -> list["LoaderCall"]:
        """One view per value the dataset argument may hold: `dataset = ImageFolder(...)` on one branch,
        `dataset = CIFAR10(...)` on another. Evidence about the items must hold for every one."""
        expr = self.argument
        if self.start is not None or not isinstance(expr, cst.Name) or \
                self.ctx.analysis(training_facts).value_at(expr) is not None:
            return [self]
        owner = self.ctx.names.binding_scope(expr)
        if owner is None:
            return [self]
        targets = owner.bindings.get(expr.value, [])
        values = owner.values.get(expr.value, [])
        if not values or len(values) > 8 or any(t is not None for t in targets) or any(v is None for v in values):
            return [self]
        return [LoaderCall(self.ctx, self.node, self.kwargs, start=v) for v in values if v is not None]

    @cached_property
    def dataset(self) -> Optional[cst.BaseExpression]:
        """The dataset expression, followed through plain assignments (of names and of `self.x`) and
        through the wrappers that keep their items (`Subset`, `random_split`, `ConcatDataset`)."""
        expr = self.start if self.start is not None else self.argument
        names = self.ctx.names
        facts = self.ctx.analysis(training_facts)
        for _ in range(8):
            if expr is None:
                return None
            if isinstance(expr, cst.Name):
                expr = facts.value_at(expr)
            elif isinstance(expr, cst.Attribute) and self.ctx.qualname(expr) is None:
                value = self_attribute_value(expr, names, skip_none=True)
                if value is None:
                    return expr
                expr = value
            elif isinstance(expr, cst.Call) and self._returned_by(expr) is not None:
                expr = self._returned_by(expr)  # `build_dataset(...)`, `self.get_dataset()`: what it returns
            elif isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Call) \
                    and self.ctx.qualname(expr.value.func) in _SPLITS:
                expr = _first_argument(expr.value)  # random_split(ds, ...)[0]
            elif isinstance(expr, cst.Call) and self.ctx.qualname(expr.func) in _SPLITS:
                expr = _first_argument(expr)  # `self.train, self.val = random_split(ds, ...)`
            elif isinstance(expr, cst.Call) and self.ctx.qualname(expr.func) in _WRAPPERS:
                first = _first_argument(expr)
                if isinstance(first, (cst.List, cst.Tuple)) and first.elements:
                    first = first.elements[0].value  # ConcatDataset([a, b]): judged by its first part
                expr = first
            else:
                return expr
        return expr

    def _returned_by(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The one value a function of this file returns (a dataset factory), when `call` calls one that
        is not a class: `make_dataset(...)`, or a method through `self.make_dataset(...)`."""
        func = call.func
        definition = self._local_definition(func)
        if not isinstance(definition, cst.FunctionDef):
            return None
        returns: list[cst.Return] = []

        class _Returns(cst.CSTVisitor):
            def visit_Return(self, node: cst.Return) -> None:
                returns.append(node)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is definition

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return False

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

        walk(definition, _Returns())
        values = [r.value for r in returns]
        return values[0] if len(values) == 1 and values[0] is not None else None

    def _local_definition(self, func: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """The def or class statement of this file that `func` names (any scope), or a method of the
        enclosing class for `self.<name>`."""
        index = self.ctx.analysis(local_definitions)
        if isinstance(func, cst.Name):
            owner = self.ctx.names.binding_scope(func)
            if owner is None:
                return None
            candidates = [d for d in index.get(func.value, []) if self.ctx.names.scopes.get(id(d)) is not None
                          and self.ctx.names.scopes[id(d)].parent is owner]
            return candidates[0] if len(candidates) == 1 else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            facts = self.ctx.analysis(training_facts)
            cls = next((a for a in facts.ancestors(self.node) if isinstance(a, cst.ClassDef)), None)
            if cls is None:
                return None
            found = [d for d in index.get(func.attr.value, []) if facts.parent(facts.parent(d) or d) is cls
                     and isinstance(d, cst.FunctionDef)]
            return found[0] if len(found) == 1 else None
        return None

    @cached_property
    def dataset_class(self) -> Optional[ClassFacts]:
        """What the project knows of the dataset's class: defined in this file or imported from the project."""
        dataset = self.dataset
        if not isinstance(dataset, cst.Call):
            return None
        func = dataset.func
        qualified = self.ctx.qualname(func)
        if qualified in TENSOR_DATASET:
            on_device = any(self._on_device(arg.value) for arg in dataset.args)
            return ClassFacts((qualified,), ON_DEVICE if on_device else IN_MEMORY)
        project = self.ctx.project
        if qualified is not None:
            return project.class_facts(qualified)
        if isinstance(func, cst.Name):
            owner = self.ctx.names.binding_scope(func)
            if owner is None:
                return project.star_classes.get(func.value)  # from a `from module import *`
            if owner is self.ctx.names.module_scope:
                found = project.own.classes.get(func.value)
                if found is None and func.value in project.own.factories:
                    found = project.own.classes.get(project.own.factories[func.value])
                return found
            definition = self._local_definition(func)  # a class defined inside a function or a method
            if isinstance(definition, cst.ClassDef):
                return project.own.classes.get(qualname_of(self.ctx, definition))
        return None

    @cached_property
    def hands_over_values(self) -> bool:
        """The dataset class puts constructor arguments into its items as they were given, and this call
        passes one of them something that may be a tensor, whose device this file does not show
        (DreamBooth's precomputed prompt embeddings): pinning may raise."""
        found = self.dataset_class
        dataset = self.dataset
        if found is None or not found.passed_arguments or not isinstance(dataset, cst.Call):
            return False
        if any(arg.star for arg in dataset.args):
            return True  # `*args`/`**kwargs`: which argument lands where is not visible
        positional = [a.value for a in dataset.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in dataset.args if a.keyword is not None}
        for entry in found.passed_arguments:
            position, _, name = entry.partition(":")
            index = int(position)
            value = keywords.get(name)
            if value is None and 0 <= index < len(positional):
                value = positional[index]
            if value is not None and not self._never_a_tensor(value):
                return True
        return False

    def _never_a_tensor(self, expr: cst.BaseExpression) -> bool:
        """A literal, or a command-line value (`args.prompt`, an option this file's argparse declares)."""
        if isinstance(expr, cst.IfExp):
            return self._never_a_tensor(expr.body) and self._never_a_tensor(expr.orelse)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self":
            return expr.attr.value in self.ctx.project.own.argparse_defaults
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
        if _preprocessed_rows(dataset, self.ctx.names) or self._built_by_row_function(dataset):
            return IN_MEMORY  # a Hugging Face dataset tokenised up front with .map(): a row lookup per item
        if isinstance(dataset, cst.BinaryOperation) and isinstance(dataset.operator, cst.Multiply):
            dataset = next((side for side in (dataset.left, dataset.right)
                            if isinstance(side, (cst.List, cst.Tuple, cst.ListComp))), dataset)  # `[item] * n`
        if _indexes(dataset, self.ctx):
            return NOTHING  # `range(n)`, `torch.arange(n)`, `idx.tolist()`: batches of indices, nothing to pin
        if isinstance(dataset, (cst.List, cst.Tuple, cst.ListComp)) or (
                isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute)
                and dataset.func.attr.value == "tolist"):
            return IN_MEMORY  # items built before the loader exists
        if isinstance(dataset, cst.Call) and (self.ctx.qualname(dataset.func) or "").startswith(_DATAPIPES):
            return UNSHARDED  # torchtext's iterable datapipes: every worker would yield the whole stream
        return None

    def _collates_to_text(self) -> bool:
        """`collate_fn=` a function of the file (or a lambda) that only returns strings, lists of them, or
        dicts of them: the batch has no tensor to pin or to move."""
        if not self.kwargs.has("collate_fn"):
            return False
        collate = self.kwargs.get("collate_fn")
        if isinstance(collate, cst.Lambda):
            return _text_only(collate.body)
        if not isinstance(collate, cst.Name):
            return False
        definition = self._local_definition(collate)
        if not isinstance(definition, cst.FunctionDef):
            return False
        returns: list[Optional[cst.BaseExpression]] = []

        class _Returns(cst.CSTVisitor):
            def visit_Return(self, node: cst.Return) -> None:
                returns.append(node.value)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is definition

        walk(definition, _Returns())
        return bool(returns) and all(r is not None and _text_only(r, definition) for r in returns)

    @cached_property
    def bulk(self) -> bool:
        """The items are decoded images, audio or arrays (a dataset class that decodes them, a torchvision
        dataset, a Hugging Face dataset with a per-item transform): a batch worth pinning."""
        found = self.dataset_class
        if found is not None and found.dataset is not None:
            return found.bulk
        dataset = self.dataset
        while isinstance(dataset, cst.Subscript):
            dataset = dataset.value
        if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute) \
                and dataset.func.attr.value in ("with_transform", "set_transform"):
            return True
        if isinstance(dataset, cst.Name):
            dataset = single_value(dataset, self.ctx.names)
        return isinstance(dataset, cst.Call) and (self.ctx.qualname(dataset.func) or "").startswith(
            "torchvision.datasets.")

    @cached_property
    def library_dataset(self) -> bool:
        """A dataset from a library that loads into CPU memory: torchvision, Hugging Face datasets."""
        dataset = self.dataset
        while isinstance(dataset, cst.Subscript):
            dataset = dataset.value  # `raw["train"]`
        while isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute) \
                and dataset.func.attr.value in _CPU_DATASET_METHODS and self.ctx.qualname(dataset.func) is None:
            dataset = dataset.func.value  # `load_dataset(...)["train"].with_transform(f)`
            while isinstance(dataset, cst.Subscript):
                dataset = dataset.value
        if isinstance(dataset, cst.Name):
            dataset = single_value(dataset, self.ctx.names)
            while isinstance(dataset, cst.Subscript):
                dataset = dataset.value
        if not isinstance(dataset, cst.Call):
            return False
        return (self.ctx.qualname(dataset.func) or "").startswith(_CPU_LIBRARIES)

    def _built_by_row_function(self, dataset: cst.BaseExpression) -> bool:
        """`get_dataset(...)`, a project function that tokenises with `.map()` and returns the result."""
        if not (isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name)):
            return False
        project = self.ctx.project
        if self.ctx.names.binding_scope(dataset.func) is self.ctx.names.module_scope \
                and dataset.func.value in project.own.row_functions:
            return True
        return self.ctx.qualname(dataset.func) in project.row_functions

    @cached_property
    def dataset_undefined(self) -> bool:
        """A call of a name the file neither defines nor imports (and no `import *` could bring)."""
        dataset = self.dataset
        return (isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name)
                and self.ctx.names.binding_scope(dataset.func) is None and "import *" not in self.ctx.text)

    def _on_device(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """The tensors already live on a device: `.cuda()`, `.to(device)`, `device=` at creation, here
        or in any value assigned to a name the expression uses (`x = x.to(device)`, then
        `TensorDataset(torch.stack([x] * n))`)."""
        if _ON_DEVICE.search(self.ctx.code(expr)):
            return True
        if depth >= 3:
            return False
        names = self.ctx.names
        for name in NameUses.of(expr).loaded:
            owner = names.binding_scope(name)
            if owner is None:
                continue
            for value in owner.values.get(name.value, []):
                if value is not None and value is not expr and self._on_device(value, depth + 1):
                    return True
        return False
