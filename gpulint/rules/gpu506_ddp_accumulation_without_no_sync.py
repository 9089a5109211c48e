"""GPU506 ddp-accumulation-without-no-sync: DDP all-reduces gradients on every accumulation micro-step."""

from __future__ import annotations

import ast

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.steps import StepFacts, step_facts
from gpulint.rules.base import Rule, RuleDocs, Target

DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                 "torch.nn.parallel.distributed.DistributedDataParallel"})

ACCUMULATES = Premise(
    "accumulates",
    "a training step loop of the file calls backward() on every iteration while every optimizer step in it "
    "runs only under a modulo condition (`if (i + 1) % accum == 0`): gradients accumulate over micro-steps.")
DDP_MODEL = Premise(
    "ddp-model",
    "the file wraps a model in `torch.nn.parallel.DistributedDataParallel` (not FSDP, whose own no_sync "
    "differs, nor DeepSpeed, whose engine accumulates by itself).")
SYNCS_EVERY_MICRO_STEP = Premise(
    "syncs-every-micro-step",
    "nothing in the file skips the gradient all-reduce: no `no_sync()` and no `require_backward_grad_sync`.")


class DdpAccumulationWithoutNoSync(Rule):
    code = "GPU506"
    name = "ddp-accumulation-without-no-sync"
    summary = "DDP gradient accumulation that all-reduces on every micro-step (no model.no_sync())"
    impact = "gradient communication cut by the accumulation factor (PyTorch Performance Tuning Guide)"
    needles = ("DistributedDataParallel",)
    ast_needles = (tuple(sorted(DDP)), (".backward(",))
    target = Target.GPU
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for training loops that accumulate gradients (backward on every iteration,
        the optimizer step under `if (i + 1) % accum == 0`) in a file that wraps its model
        in `DistributedDataParallel`, without `model.no_sync()` anywhere in the file.
        """,
        why="""
        DDP starts an all-reduce of every gradient bucket during each backward. With
        accumulation only the last micro-step's reduced gradients are used, so the others
        pay the whole communication for nothing; the PyTorch Performance Tuning Guide
        recommends `no_sync()` on the non-boundary micro-steps, which cuts gradient
        communication by the accumulation factor.
        """,
        example="""
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(Net().cuda(rank), device_ids=[rank])
        for i, (x, y) in enumerate(loader):
            loss = model(x.cuda(rank)).sub(y.cuda(rank)).pow(2).mean() / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        use_instead="""
        import contextlib

        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(Net().cuda(rank), device_ids=[rank])
        for i, (x, y) in enumerate(loader):
            boundary = (i + 1) % accum == 0
            with contextlib.nullcontext() if boundary else model.no_sync():
                loss = model(x.cuda(rank)).sub(y.cuda(rank)).pow(2).mean() / accum
                loss.backward()
            if boundary:
                optimizer.step()
                optimizer.zero_grad()
        """,
        fix_safety="""
        No fix yet: the forward pass must run inside `no_sync()` too (DDP decides at forward
        time), and the last micro-step of every accumulation window must stay synchronised,
        which the loop's own counter and condition decide. Not reported for FSDP or
        DeepSpeed, when the file mentions `no_sync` or `require_backward_grad_sync`, when the
        model is wrapped in another file, where a framework owns the loop, in CPU-only files
        or in test files.
        """,
        premises=(ACCUMULATES, DDP_MODEL, SYNCS_EVERY_MICRO_STEP),
    )

    def detect(self, ctx: AstContext) -> None:
        if not any(isinstance(c, ast.Call) and ctx.names.qualname(c.func) in DDP for c in ctx.nodes(ast.Call)):
            return
        steps = ctx.analysis(step_facts)
        synced = any(isinstance(a, ast.Attribute) and a.attr in ("no_sync", "require_backward_grad_sync")
                     for a in ctx.nodes(ast.Attribute))  # read from code, not comments
        for step in steps.steps:
            if step.framework_owned or not step.backwards or not step.steps:
                continue
            if not _accumulates(steps, step.backwards[0].call, [s.call for s in step.steps]):
                continue
            decision = self.decide({ACCUMULATES: SHOWN, DDP_MODEL: SHOWN,
                                    SYNCS_EVERY_MICRO_STEP: REFUTED if synced else SHOWN})
            ctx.report(self, step.backwards[0].call, "DDP all-reduces gradients on every accumulation micro-step: "
                                                     "run the non-boundary ones under model.no_sync()",
                       decision=decision)


def _accumulates(steps: StepFacts, backward: ast.Call, optimizer_steps: list[ast.Call]) -> bool:
    """Backward on every iteration; every optimizer step under a modulo condition."""
    place = steps.place(backward)
    if place is None or not place.every_step:
        return False
    for call in optimizer_steps:
        where = steps.place(call)
        if where is None or where.every_step or where.condition is None:
            return False
        if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(where.condition)):
            return False
    return True
