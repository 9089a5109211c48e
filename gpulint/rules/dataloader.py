"""DataLoader rules: keep the GPU fed (GPU101 pinned memory, GPU102 worker processes)."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from gpulint.analysis.facts import IN_MEMORY, NOTHING, ON_DEVICE, WORK, ClassFacts
from gpulint.analysis.kwargs import KeywordArgs, positional_args
from gpulint.analysis.names import NameTable
from gpulint.analysis.training import training_facts
from gpulint.analysis.values import self_attribute_value, single_value
from gpulint.engine.fixes import Applicability
from gpulint.engine.pending import PendingFix, Replace
from gpulint.engine.rewrite import add_keyword, is_literal, set_keyword
from gpulint.rules.base import Rule, RuleDocs, Target

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
NUM_WORKERS_POSITION = 5
PIN_MEMORY_POSITION = 7

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


def _names_in(expr: cst.BaseExpression) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `a.b`: the name `a`, not the attribute
            return False

    expr.visit(_Names())
    return found


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


class _DataLoaderRule(Rule):
    needles = ("DataLoader",)
    ast_needles = (tuple(sorted(DATALOADER)),)
    target = Target.NOT_CPU_ONLY
    in_tests = False

    def dataloader_call(self, node: cst.Call) -> Optional[KeywordArgs]:
        """Keyword arguments of a torch DataLoader call we can see completely, else None."""
        if self.ctx.qualname(node.func) not in DATALOADER:
            return None
        if self._one_batch(node):
            return None  # `next(iter(DataLoader(...)))`: one batch, then the loader is gone
        kwargs = self.ctx.kwargs(node)
        if not kwargs.complete or positional_args(node) is None:
            return None
        return kwargs

    def _one_batch(self, node: cst.Call) -> bool:
        facts = self.ctx.analysis(training_facts)
        holder = facts.parent(facts.parent(node)) if facts.parent(node) is not None else None  # Arg -> Call
        if not (isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) and holder.func.value == "iter"):
            return False
        outer = facts.parent(facts.parent(holder)) if facts.parent(holder) is not None else None
        return isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) and outer.func.value == "next"

    def dataset(self, node: cst.Call, kwargs: KeywordArgs) -> Optional[cst.BaseExpression]:
        """The dataset expression, followed through plain assignments (of names and of `self.x`) and
        through the wrappers that keep their items (`Subset`, `random_split`, `ConcatDataset`)."""
        expr = kwargs.get("dataset") if kwargs.has("dataset") else None
        if expr is None:
            positional = positional_args(node) or []
            expr = positional[0] if positional else None
        names = self.ctx.names
        facts = self.ctx.analysis(training_facts)
        for _ in range(6):
            if expr is None:
                return None
            if isinstance(expr, cst.Name):
                expr = facts.value_at(expr)
            elif isinstance(expr, cst.Attribute) and self.ctx.qualname(expr) is None:
                value = self_attribute_value(expr, names)
                if value is None:
                    return expr
                expr = value
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

    def dataset_class(self, node: cst.Call, kwargs: KeywordArgs) -> Optional[ClassFacts]:
        """What the project knows of the dataset's class: defined in this file or imported from the project."""
        dataset = self.dataset(node, kwargs)
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
                return project.own.classes.get(func.value)
        return None

    def dataset_kind(self, node: cst.Call, kwargs: KeywordArgs) -> Optional[str]:
        found = self.dataset_class(node, kwargs)
        if found is not None and found.dataset is not None:
            return found.dataset
        dataset = self.dataset(node, kwargs)
        if dataset is None:
            return None
        if self._on_device(dataset):
            return ON_DEVICE
        if _preprocessed_rows(dataset, self.ctx.names) or self._built_by_row_function(dataset):
            return IN_MEMORY  # a Hugging Face dataset tokenised up front with .map(): a row lookup per item
        if isinstance(dataset, cst.BinaryOperation) and isinstance(dataset.operator, cst.Multiply):
            dataset = next((side for side in (dataset.left, dataset.right)
                            if isinstance(side, (cst.List, cst.Tuple, cst.ListComp))), dataset)  # `[item] * n`
        if isinstance(dataset, (cst.List, cst.Tuple, cst.ListComp)):
            return IN_MEMORY  # items built before the loader exists
        if isinstance(dataset, cst.Call) and (self.ctx.qualname(dataset.func) or "").startswith(_DATAPIPES):
            return UNSHARDED  # torchtext's iterable datapipes: every worker would yield the whole stream
        return None

    def _built_by_row_function(self, dataset: cst.BaseExpression) -> bool:
        """`get_dataset(...)`, a project function that tokenises with `.map()` and returns the result."""
        if not (isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name)):
            return False
        project = self.ctx.project
        if self.ctx.names.binding_scope(dataset.func) is self.ctx.names.module_scope \
                and dataset.func.value in project.own.row_functions:
            return True
        return self.ctx.qualname(dataset.func) in project.row_functions

    def dataset_undefined(self, node: cst.Call, kwargs: KeywordArgs) -> bool:
        """A call of a name the file neither defines nor imports (and no `import *` could bring)."""
        dataset = self.dataset(node, kwargs)
        return (isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name)
                and self.ctx.names.binding_scope(dataset.func) is None and "import *" not in self.ctx.text)

    def dataset_unresolved(self, node: cst.Call, kwargs: KeywordArgs) -> bool:
        """The dataset is a parameter, a lambda argument or a loop variable, or a class the file never
        defines nor imports: nothing says what it holds."""
        if self.dataset_undefined(node, kwargs):
            return True
        expr = kwargs.get("dataset") if kwargs.has("dataset") else next(iter(positional_args(node) or []), None)
        names = self.ctx.names
        while isinstance(expr, cst.Name):
            owner = names.binding_scope(expr)
            if owner is None:
                return False
            values = owner.values.get(expr.value, [])
            if values and all(v is None for v in values) and all(t is None for t in owner.bindings[expr.value]):
                return True  # bound only as a parameter or a loop target
            expr = single_value(expr, names)
        return False

    def _on_device(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """The tensors already live on a device: `.cuda()`, `.to(device)`, `device=` at creation, here
        or in any value assigned to a name the expression uses (`x = x.to(device)`, then
        `TensorDataset(torch.stack([x] * n))`)."""
        if _ON_DEVICE.search(self.ctx.code(expr)):
            return True
        if depth >= 3:
            return False
        names = self.ctx.names
        for name in _names_in(expr):
            owner = names.binding_scope(name)
            if owner is None:
                continue
            for value in owner.values.get(name.value, []):
                if value is not None and value is not expr and self._on_device(value, depth + 1):
                    return True
        return False


class DataLoaderPinMemory(_DataLoaderRule):
    code = "GPU101"
    name = "dataloader-without-pin-memory"
    summary = "DataLoader without pin_memory=True"
    impact = "asynchronous host-to-device copies (PyTorch Tuning Guide)"
    fix = Applicability.SAFE
    fix_detail = "safe (dataset known to yield CPU tensors); unsafe (otherwise)"
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.data.DataLoader(...)` calls that do not pass `pin_memory`,
        in files that are not explicitly CPU-only.
        """,
        why="""
        Batches in pageable host memory are first copied by the driver into a pinned
        staging buffer, and the copy to the GPU cannot overlap compute: the training
        step waits for it. With `pin_memory=True` the loader's pin thread page-locks each
        batch, so `.to(device, non_blocking=True)` copies asynchronously over DMA. The
        PyTorch Performance Tuning Guide lists it among the first data-loading fixes; the
        pin_memory/non_blocking tutorial measures pinned copies well ahead of pageable
        ones (pinning in the main thread instead "can be up to twice as slow").
        On a machine without a GPU, `pin_memory=True` is a no-op with a warning.
        """,
        example="""
        loader = DataLoader(dataset, batch_size=64, shuffle=True)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
        """,
        use_instead="""
        loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        """,
        fix_safety="""
        Adds `pin_memory=True`; results are unchanged. Safe when the dataset is known to yield
        CPU tensors: a dataset class gpulint reads (in this file or another file of the
        project), a TensorDataset of CPU tensors, torchvision and Hugging Face datasets.
        Otherwise unsafe: pinning a dataset of CUDA tensors raises "cannot pin
        'torch.cuda.FloatTensor'", and gpulint cannot see which kind it is. Pinned memory is
        page-locked host RAM, so on hosts short of RAM with very large batches review the
        change. Not reported when the dataset visibly holds tensors on the GPU (`.to(device)`
        or `device=` when built, also through the names it is built from), when its items
        carry no tensors (a prompt and an index), for batches that feed JAX, for a loader used
        for one batch (`next(iter(DataLoader(...)))`), when the `collate_fn` comes from a module that
        defines a batch container with `.to()` but no `.pin_memory()` (DETR's NestedTensor: the pin
        thread passes it through unpinned), on a TPU (`torch_xla`), or in test files.
        """,
    )

    def _collate_returns_unpinnable(self, kwargs: KeywordArgs) -> bool:
        """`collate_fn=` a function of a module that defines a batch container without `pin_memory()`."""
        collate = kwargs.get("collate_fn") if kwargs.has("collate_fn") else None
        if collate is None:
            return False
        project = self.ctx.project
        if isinstance(collate, cst.Name) and self.ctx.names.binding_scope(collate) is self.ctx.names.module_scope \
                and collate.value in project.own.unpinned_collates:
            return True
        return self.ctx.qualname(collate) in project.unpinned_collates

    def visit_Call(self, node: cst.Call) -> None:
        kwargs = self.dataloader_call(node)
        if kwargs is None or kwargs.has("pin_memory"):
            return
        if len(positional_args(node) or []) > PIN_MEMORY_POSITION:
            return
        kind = self.dataset_kind(node, kwargs)
        if kind == ON_DEVICE:
            return  # the dataset already holds device tensors: pinning them raises
        if kind == NOTHING:
            return  # items carry no tensors (a prompt, an index): nothing to pin
        if kind is None and self.dataset_undefined(node, kwargs):
            return  # a dataset class the file neither defines nor imports
        if self.ctx.project.own.jax:
            return  # batches feed JAX as NumPy arrays: torch's pinned memory does not reach them
        if self._collate_returns_unpinnable(kwargs):
            return  # the pin thread passes the batch's container through unpinned: the flag would do nothing
        edit = Replace(node, add_keyword(node, "pin_memory", "True"))
        if kind in (IN_MEMORY, WORK) or self._library_dataset(node, kwargs):
            fix = PendingFix.safe("Add `pin_memory=True`", edit)
        else:  # pin_memory=True raises "cannot pin 'torch.cuda.FloatTensor'" on a dataset of CUDA tensors
            fix = PendingFix.unsafe("Add `pin_memory=True` (unsafe: gpulint cannot see that the dataset yields "
                                    "CPU tensors, and pinning CUDA tensors raises)", edit)
        self.report(
            node,
            "DataLoader without pin_memory=True: host-to-device copies stay synchronous; "
            "pass pin_memory=True",
            fix,
        )

    def _library_dataset(self, node: cst.Call, kwargs: KeywordArgs) -> bool:
        """A dataset from a library that loads into CPU memory: torchvision, Hugging Face datasets."""
        dataset = self.dataset(node, kwargs)
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


class DataLoaderNumWorkers(_DataLoaderRule):
    code = "GPU102"
    name = "dataloader-without-workers"
    summary = "DataLoader loads batches in the training process (num_workers=0)"
    impact = ("1.65-1.80x with GPU101 on the shipped image-classifier fixture when a CPU core is free; "
              "0.87-1.17x with both cores busy (bench/verify_dataloader.py)")
    fix = Applicability.UNSAFE
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.data.DataLoader(...)` calls without `num_workers` whose
        dataset does work per item (loads, decodes, transforms or parses), or may: a
        library dataset, or one gpulint cannot see. An explicit `num_workers=0` is the
        user's choice and is reported only with `allow-zero-workers = false`.
        """,
        why="""
        With no workers, every batch is loaded, decoded and augmented in the training
        process, between GPU steps: "data loading is synchronous … the main process has to
        wait" (PyTorch Performance Tuning Guide). Worker processes prepare the next batches
        while the GPU computes. How much this buys depends on the per-item cost of the
        dataset; `gpulint verify` measures it on your script (bench/ reports the figure for
        the shipped image-classifier fixture).
        """,
        example="""
        loader = DataLoader(ImageFolder(root, transform=augment), batch_size=64)
        """,
        use_instead="""
        loader = DataLoader(ImageFolder(root, transform=augment), batch_size=64, num_workers=4)
        """,
        fix_safety="""
        Unsafe: workers pickle the dataset (lambdas and locally defined classes fail
        under the spawn start method), scripts need an `if __name__ == "__main__":` guard
        on macOS and Windows, and per-worker random state must be seeded for
        reproducibility. The fix writes `num_workers=min(N, os.cpu_count() or 1)`, N from the
        `num-workers` setting (default 4): more workers than cores only slows the run (and torch
        warns). No fix when `num_workers` comes from a `**dict` other calls may share.
        Not reported for datasets whose items cost nothing to make, as read from their class
        in this file or elsewhere in the project: in-memory data indexed per item
        (`TensorDataset`, lists or tensors built in `__init__`), pre-tokenised Hugging Face
        datasets (`.map(...)`, also inside a project function that returns one), prompt-only
        items; nor for datasets on the GPU (forked workers would re-initialise CUDA),
        `IterableDataset`s and torchtext datapipes that do not shard by `get_worker_info()`
        (workers would duplicate the data), datasets handed in as parameters (whether workers
        pay off depends on the caller), one-batch loaders, and test files.
        """,
    )

    def visit_Call(self, node: cst.Call) -> None:
        kwargs = self.dataloader_call(node)
        if kwargs is None:
            return
        positional = positional_args(node) or []
        if len(positional) > NUM_WORKERS_POSITION:
            value: Optional[cst.BaseExpression] = positional[NUM_WORKERS_POSITION]
            explicit = True
        else:
            explicit = kwargs.has("num_workers")
            value = kwargs.get("num_workers")
        if explicit and not is_literal(value, "0"):
            return  # the user chose a value
        if explicit and self.ctx.settings.allow_zero_workers:
            return  # an explicit num_workers=0 is the user's choice (`allow-zero-workers = false` reports it)
        if self._dataset_unsuited(node, kwargs):
            return
        workers = self.ctx.settings.num_workers
        # capped by the machine's cores: more workers than cores is slower, and torch warns about it
        os_module = self.ctx.imports.module_alias("os")
        value = f"min({workers}, {os_module.expr}.cpu_count() or 1)"
        fix = None
        if not explicit:
            new = add_keyword(node, "num_workers", value)
        elif "num_workers" in kwargs.values and "num_workers" not in kwargs.from_splat:
            new = set_keyword(node, "num_workers", value)
        else:
            new = None
        if new is not None:
            fix = PendingFix.unsafe(f"Set `num_workers={value}`", os_module.edit, Replace(node, new))
        self.report(
            node,
            "DataLoader without worker processes: batches are prepared between GPU steps; "
            f"set num_workers (e.g. {workers})",
            fix,
        )

    def _dataset_unsuited(self, node: cst.Call, kwargs: KeywordArgs) -> bool:
        """Workers would not help: items cost nothing to make, or live on the GPU, or would repeat."""
        kind = self.dataset_kind(node, kwargs)
        if kind in (ON_DEVICE, NOTHING, IN_MEMORY, UNSHARDED):
            return True  # in memory: workers only add copies; on the GPU: forked workers re-initialise CUDA
        if kind is None and self.dataset_unresolved(node, kwargs):
            return True  # a dataset handed in from elsewhere: whether workers pay off is not known here
        found = self.dataset_class(node, kwargs)
        return found is not None and found.iterable and not found.sharded  # each worker would yield everything
