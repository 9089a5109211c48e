"""GPU104 blocking-host-to-device-copy: a pinned loader's batch copied to the device synchronously."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, arg
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of
from gpulint.analysis.loader_loops import (
    LoaderLoop,
    Move,
    assigned_from,
    base_name,
    loader_loops,
    read_on_host,
    runs_once,
)
from gpulint.analysis.loaders import PERSON_WAITS, waits_for_a_person
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DATALOADER, DATALOADER_COLLATE_FN, DATALOADER_PIN_MEMORY
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

PINNED = Premise(
    "pinned-loader",
    "the loop iterates only DataLoaders of this file built with a literal `pin_memory=True` (by keyword, "
    "position or a `**dict` in view), followed through names, `self.x`, function parameters and "
    "`enumerate`/`tqdm` wrappers: their batches sit in page-locked memory, which a copy can overlap.")
BATCH_COPY = Premise(
    "batch-copy",
    "the call copies a batch of that loop (the loop's target, a part unpacked or indexed from it) to a "
    "device with `.to(device)` or `.cuda()`, without `non_blocking`; its result is not read on the host "
    "later in the loop (`.item()`, `.tolist()`, `.numpy()`, `.cpu()`, `print()`, `float()`), and the "
    "batch is not written on the host after the copy; not a whole batch a custom `collate_fn` built.")
REPEATED = Premise(
    "repeated-copy",
    "the loop copies batch after batch: refuted when its body leaves the loop on the first pass (a top-level "
    "`break`, `return` or `raise`, and no `continue` that could skip it), as a data-dependent initialisation "
    "that runs one batch does: one copy has nothing to overlap.")
UNATTENDED = Premise(
    "unattended",
    "the loop runs unattended, so that the host's wait for each copy adds up: refuted for an interactive "
    "viewer, a loop whose body waits for a person on every batch (whatever else iterates the loader), which "
    f"makes {PERSON_WAITS}. A key press, not the copy, paces each batch.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "the target is an accelerator: shown by `.cuda()`, a \"cuda\"/\"xpu\" string or device evidence in "
    "the file or a caller; refuted where the code pins the CPU.")

_MESSAGE = "copy of a pinned batch to the device without non_blocking=True: the host waits for each copy"


class BlockingHostToDeviceCopy(Rule):
    code = "GPU104"
    name = "blocking-host-to-device-copy"
    habit = "data-loading"
    summary = "pinned loader's batch copied with .to(device)/.cuda() without non_blocking=True"
    impact = "copies overlap the host's work instead of blocking it (PyTorch pin_memory/non_blocking tutorial)"
    needles = ("DataLoader",)
    ast_needles = (tuple(sorted(DATALOADER)), (".to(", ".cuda("))
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    fix = Applicability.SAFE
    verification = Verification(NEUTRAL, (), "non_blocking=True copies: on a CPU there is no copy to overlap")
    docs = RuleDocs(
        what="""
        Checks for `.to(device)` / `.cuda()` calls on the batches of a DataLoader built with
        `pin_memory=True` in the same file, inside the loop over that loader, that do not
        pass `non_blocking=True`. Loaders without `pin_memory` are GPU101's: its fix adds
        both.
        """,
        why="""
        A pinned batch can be copied asynchronously: with `non_blocking=True` the host queues
        the copy and goes on (to the forward pass, the next batch), and the device orders the
        copy before the kernels that use it. Without it, each copy makes the host wait until
        the data has arrived. PyTorch's pin_memory/non_blocking tutorial ("A guide on good
        usage of non_blocking and pin_memory()") shows non-blocking copies of pinned tensors
        issuing all transfers and synchronising once, where blocking ones wait one by one.
        gpulint measured no figure: on a CPU there is no copy to overlap (`non_blocking` is a
        no-op there; `gpulint verify` of fixtures/scripts/pinned_regression.py shows the
        rewrite's loss identical bit for bit, and no runtime effect).
        """,
        example="""
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for images, labels in loader:
            images, labels = images.cuda(), labels.cuda()
        """,
        use_instead="""
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for images, labels in loader:
            images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
        """,
        fix_safety="""
        Safe: host-to-device copies of pinned memory stay ordered on the device's stream before
        every kernel that reads them, so the values are the same. Only host-to-device copies
        are changed: never `.cpu()` or `.to("cpu")` (a device-to-host copy read before a sync
        is garbage), never a copy whose result is read on the host later in the loop, never a
        batch that the host writes after the copy (the copy may still be reading it). Not
        reported for loaders without a literal `pin_memory=True`, for loops gpulint cannot
        tie to one of this file's DataLoaders (a framework's `prepare`d loader), for the
        whole batch of a custom `collate_fn` (its `.to()` may take no `non_blocking`), for
        loops that take one batch and break (nothing to overlap), for the loop of an interactive
        viewer (every batch waits for a key press), nor in test functions.
        """,
        premises=(PINNED, BATCH_COPY, REPEATED, UNATTENDED, ON_ACCELERATOR),
        fix_cases=(
            FixCase("`non_blocking=True` on the copies of a pinned loader's batches (preview; host-to-device only)",
                    Applicability.SAFE, "basic.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        seen: set[int] = set()
        for loop in ctx.analysis(loader_loops).loops:
            pinned = _pinned(ctx, loop)
            if pinned is REFUTED:
                continue
            custom_collate = any(arg(c, *DATALOADER_COLLATE_FN, ctx.kwargs(c)) is not None or ctx.kwargs(c).unknown
                                 for c in loop.loaders)
            nodes = list(walk_nodes(ast.Module(body=loop.loop.body, type_ignores=[])))
            once = REFUTED if runs_once(loop.loop) else SHOWN
            unattended = REFUTED if waits_for_a_person(ctx, loop.loop) else SHOWN
            for move in loop.moves:
                if id(move.call) in seen or _chooses_blocking(move.call):
                    continue  # already asynchronous, or `non_blocking=False` chosen explicitly
                seen.add(id(move.call))
                copy = _batch_copy(ctx, loop, move, nodes, custom_collate)
                decision = self.decide({
                    PINNED: pinned, BATCH_COPY: copy, REPEATED: once, UNATTENDED: unattended,
                    ON_ACCELERATOR: SHOWN if move.accelerator else accelerator_evidence(ctx.project),
                })
                ctx.report(self, move.call, _MESSAGE, fix=Applicability.SAFE,
                           fix_message="Copy asynchronously: `non_blocking=True`", decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword

        if detection.fix is None or not isinstance(node, cst.Call):
            return None
        return PendingFix.safe(detection.fix_message, Replace(node, add_keyword(node, "non_blocking", "True")))


def _chooses_blocking(call: ast.Call) -> bool:
    """The call passes non_blocking at all: by keyword, or by position (`.to(d, dtype, nb)`, `.cuda(d, nb)`)."""
    assert isinstance(call.func, ast.Attribute)
    positional = 2 if call.func.attr == "cuda" else 3
    return any(k.arg == "non_blocking" for k in call.keywords) or len(call.args) >= positional


def _pinned(ctx: AstContext, loop: LoaderLoop) -> Evidence:
    if not loop.complete:
        return UNDECIDED  # the loop may iterate something else too
    found: list[Evidence] = []
    for loader in loop.loaders:
        kwargs = ctx.kwargs(loader)
        value = arg(loader, *DATALOADER_PIN_MEMORY, kwargs)
        if value is None:
            found.append(UNDECIDED if kwargs.unknown else REFUTED)
        elif isinstance(value, ast.Constant):
            found.append(SHOWN if value.value is True else REFUTED)
        else:
            found.append(UNDECIDED)  # `pin_memory=args.pin_memory`
    return all_of(*found)


def _batch_copy(ctx: AstContext, loop: LoaderLoop, move: Move, nodes: list[ast.AST], custom_collate: bool) -> Evidence:
    func = move.call.func
    assert isinstance(func, ast.Attribute)
    if custom_collate and isinstance(func.value, ast.Name) and func.value.id in loop.whole:
        return REFUTED  # a batch object a collate_fn built: its own `.to()` may not take non_blocking
    if read_on_host(ctx, nodes, move.call):
        return REFUTED
    source = base_name(func.value)
    if source is not None and source not in assigned_from(ctx, move.call) \
            and _written_after(nodes, source, move.call):
        return REFUTED
    return SHOWN


def _written_after(nodes: list[ast.AST], name: str, call: ast.Call) -> bool:
    """`name` is changed in place on the host after the copy: `x.add_(1)`, `x[0] = 1`, `x += 1`."""
    start = (call.lineno, call.col_offset)
    for node in nodes:
        position = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if position <= start:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                and not node.func.attr.startswith("_") and base_name(node.func.value) == name \
                and node.func.value is not call:
            return True
        if isinstance(node, ast.AugAssign) and base_name(node.target) == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and base_name(t) == name
                                                for t in node.targets):
            return True
    return False
