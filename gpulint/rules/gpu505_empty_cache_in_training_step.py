"""GPU505 empty-cache-in-training-step: releasing the allocator's cache every step makes every step pay cudaMalloc."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import SHOWN, Premise
from gpulint.analysis.steps import STEP_AST_NEEDLES, StepFacts, step_facts
from gpulint.core.torch_api import EMPTY_CACHE
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

EVERY_STEP = Premise(
    "every-step",
    "`torch.cuda.empty_cache()` runs on every step of a training loop the user writes (the innermost loop "
    "that, directly or through functions of the same file, calls backward() and steps an optimizer), not under "
    "an interval condition (`if step % N == 0`), not in an `except` handler (recovering from an out-of-memory "
    "error), not in a loop a framework runs.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "training runs on a CUDA device: shown by device evidence in the file or a caller; refuted where the code "
    "pins the CPU (where the call does nothing).")


class EmptyCacheInTrainingStep(Rule):
    code = "GPU505"
    name = "empty-cache-in-training-step"
    summary = "torch.cuda.empty_cache() on every training step"
    impact = "saves a synchronisation and re-allocation per step (CUDA semantics notes); no figure measured here"
    needles = ("empty_cache",)
    ast_needles = (tuple(sorted(EMPTY_CACHE)), *STEP_AST_NEEDLES)
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for `torch.cuda.empty_cache()` that runs on every step of a training loop:
        the innermost loop that calls `backward()` and steps an optimizer, directly or
        through functions of the same file.
        """,
        why="""
        PyTorch's caching allocator keeps freed blocks to hand them out again without a
        `cudaMalloc`/`cudaFree`. `empty_cache()` returns every unused cached block to the
        driver, so the next step allocates its activations and gradients again from the
        driver, and freeing device memory synchronises the device. The CUDA semantics notes
        (Memory management) say the call does not increase the memory available to PyTorch:
        it only makes cached memory visible to other processes and tools such as
        `nvidia-smi`. On every step it buys nothing and costs allocation time each step.
        """,
        example="""
        import torch

        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.empty_cache()
        """,
        use_instead="""
        import torch

        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            torch.cuda.empty_cache()  # once per epoch, before evaluation, if another process needs the memory
        """,
        fix_safety="""
        No fix: removing the call is right unless another process on the same GPU needs the
        memory back, which the code does not say. Not reported under an interval condition
        (`if step % 1000 == 0:` costs a thousandth as much, and is a deliberate answer to
        fragmentation), in an `except` handler (recovering from an out-of-memory error), once
        per epoch, in loops a framework runs, in CPU-only files, or in tests.
        """,
        premises=(EVERY_STEP, ON_ACCELERATOR),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        if not facts.steps:
            return
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if facts.qualname(node.func) not in EMPTY_CACHE:
                continue
            place = facts.place(node)
            if place is None or place.step.framework_owned or not place.every_step:
                continue
            decision = self.decide({EVERY_STEP: SHOWN, ON_ACCELERATOR: accelerator_evidence(ctx.project)})
            if decision.report:
                ctx.report(self, node, "torch.cuda.empty_cache() every training step makes the next step allocate "
                           "again: drop it or call it per epoch", decision=decision)
