"""GPU102 dataloader-without-workers: batches are prepared in the training process, between steps."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of
from gpulint.analysis.loaders import (
    MANY_BATCHES,
    MANY_PER_ITERATOR,
    UNATTENDED,
    UNSHARDED,
    LoaderCall,
    dataloader_call,
    draws_few_batches,
    one_batch_per_iterator,
    paced_by_a_person,
)
from gpulint.analysis.reach import (
    FEEDS_TRAINING,
    LOADS_BATCHES,
    SELF_TEST,
    draws_batches,
    feeds_training,
    not_self_test,
)
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.options import Flag, Integer, Option
from gpulint.core.torch_api import DATALOADER_AST_NEEDLES, DATALOADER_NEEDLES, DATALOADER_NUM_WORKERS
from gpulint.core.verification import NEUTRAL, RANDOM_STREAMS, Verification
from gpulint.project.facts import IN_MEMORY, NOTHING, ON_DEVICE, WORK
from gpulint.project.view import ProjectView
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

NUM_WORKERS_POSITION = DATALOADER_NUM_WORKERS[1]
NUM_WORKERS: Option[int] = Option("num-workers", Integer(1), 4, "num_workers the fix writes (capped by the cores)")
ALLOW_ZERO_WORKERS: Option[bool] = Option(
    "allow-zero-workers", Flag(), True, "an explicit num_workers=0 is the user's choice: not reported")

PER_ITEM_WORK = Premise(
    "per-item-work",
    "the dataset does work per item that workers can take over: its class (read wherever it is defined) "
    "loads, decodes, transforms or parses per item, or it is a torchvision dataset or a Hugging Face dataset "
    "with a per-item transform. Refuted by items held in memory (TensorDataset, lists, pre-tokenised rows, "
    "a deep copy of what the dataset holds, or data indexed by a class whose only per-item work is a callable its "
    "constructor may be given, None by default, when the call gives none: adarnn's weather data, blind23), "
    "items on the GPU (forked workers would re-initialise CUDA), also batches a `collate_fn` moves there (a "
    "function of the file or of a project module, a lambda calling one or `functools.partial` of one, whose own "
    "code or a function of its file it calls makes `.to(device)`, `.cuda()` or `torch.tensor(..., device=...)`, "
    "as a Dataset class's items are judged: collating runs in the workers; LoRA's bertabs, blind11), items "
    "without tensors (prompts, indices), "
    "and iterables that do not shard between workers, and, on a path that trains nothing (an inference script "
    "no project file imports, or a module only such scripts or inference notebooks use, even inside a "
    "function), by a dataset class "
    "whose items neither read a file nor decode data (one text conversion per line: nothing next to the "
    "model's own time). A dataset handed in as a parameter, or of a class gpulint cannot read, is undecided.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "training runs on an accelerator (CUDA, MPS, XPU, or one a framework picks), which waits while batches "
    "are prepared: shown by device evidence in the file or a caller; refuted where the code pins the CPU.")


class DataLoaderNumWorkers(Rule):
    code = "GPU102"
    name = "dataloader-without-workers"
    habit = "data-loading"
    summary = "DataLoader loads batches in the training process (num_workers=0)"
    impact = ("1.65-1.80x with GPU101 on the shipped image-classifier fixture when a CPU core is free; "
              "0.87-1.17x with both cores busy (bench/verify_dataloader.py)")
    needles = DATALOADER_NEEDLES
    ast_needles = DATALOADER_AST_NEEDLES
    target = Target.NOT_CPU_ONLY
    in_tests = False
    fix = Applicability.UNSAFE
    options = (NUM_WORKERS, ALLOW_ZERO_WORKERS)
    verification = Verification(
        NEUTRAL, ("dataloader",), "the DataLoader with worker processes yields batches",
        lambda kind, details: (details.get("num_workers") or 0) > 0,
        mismatch_hint="with worker processes a Dataset that draws from the global RNG in __getitem__ gets "
                      "different random numbers (seed a generator per item to make them reproducible)",
        changes=(RANDOM_STREAMS,))
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
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        loader = DataLoader(ImageFolder(root, transform=augment), batch_size=64)
        for images, labels in loader:
            images, labels = images.cuda(), labels.cuda()
        """,
        use_instead="""
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        loader = DataLoader(ImageFolder(root, transform=augment), batch_size=64, num_workers=4)
        for images, labels in loader:
            images, labels = images.cuda(), labels.cuda()
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
        items; nor for datasets on the GPU, or batches a `collate_fn` moves there (forked workers
        would re-initialise CUDA),
        `IterableDataset`s and torchtext datapipes that do not shard by `get_worker_info()`
        (workers would duplicate the data), datasets handed in as parameters (whether workers
        pay off depends on the caller), one-batch loaders (also a loader only ever drawn as
        `next(iter(loader))`: every new iterator would start the workers again for one batch),
        loaders only an interactive viewer iterates
        (every batch waits for a key press), and test files. On a path that trains
        nothing (an inference script no project file imports, or a module only such scripts or
        inference notebooks use),
        only datasets whose items read a file or decode data (images, audio, arrays) are reported:
        converting a line of text held in memory costs nothing next to the model. Nor, like GPU101,
        for a loader whose only consumer is inference (feeds-training): one an evaluation script
        builds at its top level, or one a function of a file that trains nothing only iterates
        with autograd off.
        """,
        premises=(PER_ITEM_WORK, ON_ACCELERATOR, SELF_TEST, LOADS_BATCHES, MANY_BATCHES, MANY_PER_ITERATOR,
                  UNATTENDED, FEEDS_TRAINING),
        fix_cases=(
            FixCase("`num_workers=min(N, os.cpu_count() or 1)`",
                    Applicability.UNSAFE, "per_item_work_flagged.py"),
            FixCase("`num_workers` comes from a `**dict` other calls may share",
                    None, "explicit_zero_in_splat_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            self._check(ctx, node)

    def _check(self, ctx: AstContext, node: ast.Call) -> None:
        loader = dataloader_call(ctx, node)
        if loader is None:
            return
        kwargs = loader.kwargs
        name, _ = DATALOADER_NUM_WORKERS
        explicit, _ = loader.workers
        if explicit and not loader.no_workers_chosen:
            return  # the user chose a value
        if explicit and ctx.settings.value(ALLOW_ZERO_WORKERS):
            return  # an explicit num_workers=0 is the user's choice (`allow-zero-workers = false` reports it)
        inference = _inference_only(ctx.project)
        work = all_of(*(_per_item_work(each, inference) for each in loader.alternatives()))
        decision = self.decide({PER_ITEM_WORK: work, ON_ACCELERATOR: accelerator_evidence(ctx.project),
                                 MANY_BATCHES: REFUTED if draws_few_batches(ctx, loader) else SHOWN,
                                 MANY_PER_ITERATOR: REFUTED if one_batch_per_iterator(ctx, node) else SHOWN,
                                 UNATTENDED: REFUTED if paced_by_a_person(ctx, node) else SHOWN,
                                 SELF_TEST: not_self_test(ctx.tree, node, ctx.parent, ctx.project.imported),
                                 LOADS_BATCHES: draws_batches(ctx, node),
                                 FEEDS_TRAINING: feeds_training(ctx, node)})
        if not decision.report:
            return
        workers = ctx.settings.value(NUM_WORKERS)
        # capped by the machine's cores: more workers than cores is slower, and torch warns about it
        capped = f"min({workers}, {ctx.names.module_alias('os')}.cpu_count() or 1)"
        # add the keyword, or set it where the call writes it (not where a shared `**dict` does)
        how = "add" if not explicit else "set" if name in kwargs.explicit and name not in kwargs.from_splat else ""
        note = ""
        too_new = floors.too_new(ctx.settings.torch_version, [floors.NUM_WORKERS])
        if not how:
            note = "no fix: num_workers comes from a `**dict` other calls may share; set it there"
        elif too_new is not None:
            note = f"no fix: {too_new.reason()}"
        ctx.report(self, node, "DataLoader without worker processes: the GPU waits while each batch is prepared",
                   fix=Applicability.UNSAFE if not note else None, fix_message=f"Set `num_workers={capped}`",
                   data={"how": how}, note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword, set_keyword

        assert isinstance(node, cst.Call) and detection.data is not None
        os_module = fctx.imports.module_alias("os")
        capped = f"min({fctx.settings.value(NUM_WORKERS)}, {os_module.expr}.cpu_count() or 1)"
        name = DATALOADER_NUM_WORKERS[0]
        new = add_keyword(node, name, capped) if detection.data["how"] == "add" else set_keyword(node, name, capped)
        return PendingFix.unsafe(f"Set `num_workers={capped}`", os_module.edit, Replace(node, new))


def _inference_only(project: ProjectView) -> bool:
    """The loader is on a path that trains nothing: an inference script (a `__main__` running models under
    no_grad, no backward, no optimizer, no trainer) that no project file imports, or a module only such
    scripts or inference notebooks use (`ProjectView.evaluated_only`)."""
    return (project.inference_script and not project.imported) or project.evaluated_only


def _per_item_work(loader: LoaderCall, inference: bool = False) -> Evidence:
    """Workers help when items cost work to make; they do not when items cost nothing, live on the GPU,
    or would repeat in every worker, nor, where nothing trains, when the work is a cheap conversion of data
    already in memory (no file read, no decoding)."""
    kind = loader.dataset_kind
    if kind in (ON_DEVICE, NOTHING, IN_MEMORY, UNSHARDED):
        return REFUTED  # in memory: workers only add copies; on the GPU: forked workers re-initialise CUDA
    found = loader.dataset_class
    if found is not None and found.iterable and not found.sharded:
        return REFUTED  # each worker would yield everything
    if kind is None and loader.dataset_undefined:
        return REFUTED  # a class the file neither defines nor imports
    if inference and kind == WORK and found is not None and not found.bulk and not found.item_io:
        return REFUTED  # inference over text held in memory: the model's time, not the items', is the loop's
    if kind == WORK or loader.bulk:
        return SHOWN
    return UNDECIDED  # a dataset handed in, one gpulint cannot read, raw Hugging Face rows
