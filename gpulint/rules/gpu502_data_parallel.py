"""GPU502 data-parallel: nn.DataParallel trains on several GPUs from one Python thread, slower than DDP."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Premise
from gpulint.analysis.steps import StepFacts, step_facts
from gpulint.core.torch_api import DATA_PARALLEL
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

TRAINS = Premise(
    "trains",
    "the wrapped model is trained in this file: it has a loop that calls backward() and steps an optimizer "
    "(directly or through functions of the same file). Undecided otherwise (inference, or training elsewhere).")
SEVERAL_DEVICES = Premise(
    "several-devices",
    "the wrapper may spread the model over more than one GPU: refuted by a literal `device_ids` of one device "
    "(then DataParallel only adds overhead, a different advice).")


RUNS = Premise(
    "runs-by-default",
    "the wrapping runs when the project is run as shipped: refuted when it sits under an `if` (or a conditional "
    "expression) that requires a command-line flag (`args.use_multi_gpu`, `self.args.multi_gpu`) which the file "
    "or a caller declares off (`action=\"store_true\"` or `default=False`) and that the project's shell "
    "scripts (`*.sh`), which run that parser (they pass other flags it declares), never pass. A flag a shipped "
    "script passes keeps it shown, and so does a project that ships no such script (how it is run is not "
    "shown: the flag is an option its users are offered).")


class DataParallelRule(Rule):
    code = "GPU502"
    name = "data-parallel"
    summary = "nn.DataParallel: DistributedDataParallel with torchrun is faster, even on one machine"
    impact = "DDP docs: 'significantly faster than torch.nn.DataParallel' for single-node multi-GPU training"
    needles = ("DataParallel",)
    ast_needles = (tuple(sorted(DATA_PARALLEL)),)
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for `torch.nn.DataParallel(...)` (through any import alias) wrapping a model
        the file trains.
        """,
        why="""
        DataParallel runs every GPU from one Python process: each step it scatters the batch
        from the first GPU, replicates the model onto every device, runs the replicas in
        threads that contend for the GIL, and gathers the outputs back on the first GPU,
        which also holds the loss and the optimizer state. The DistributedDataParallel docs
        recommend DDP instead: it is "proven to be significantly faster than
        torch.nn.DataParallel for single-node multi-GPU data parallel training", with one
        process per GPU and gradients all-reduced in buckets while backward runs.
        """,
        example="""
        import torch
        from torch import nn

        model = nn.DataParallel(nn.Linear(10, 1)).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import os

        import torch
        import torch.distributed as dist
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group("nccl")  # run with: torchrun --nproc_per_node=NUM_GPUS train.py
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        model = DistributedDataParallel(nn.Linear(10, 1).cuda(), device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:  # a DistributedSampler gives each process its share
            loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        No fix: moving to DDP is not a mechanical edit. It needs a launcher (`torchrun`),
        `init_process_group`, a `DistributedSampler` for the loader, saving and logging on
        rank 0 only, and the per-GPU batch size instead of the global one. Not reported for a
        literal single device (`device_ids=[0]`), behind a multi-GPU flag that defaults to off
        and that the project's shell scripts, which run its parser, never pass, in files that do not train the model, in
        CPU-only files, or in tests.
        """,
        premises=(TRAINS, SEVERAL_DEVICES, RUNS),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if facts.qualname(node.func) not in DATA_PARALLEL:
                continue
            devices = next((k.value for k in node.keywords if k.arg == "device_ids"),
                           node.args[1] if len(node.args) > 1 else None)
            if isinstance(devices, (ast.List, ast.Tuple)) and len(devices.elts) == 1:
                continue
            trains = SHOWN if any(not s.framework_owned for s in facts.steps) else UNDECIDED
            runs = REFUTED if _behind_flag_off(ctx, node) else SHOWN
            decision = self.decide({TRAINS: trains, SEVERAL_DEVICES: SHOWN, RUNS: runs})
            if decision.report:
                ctx.report(self, node, "nn.DataParallel drives every GPU from one process: use "
                           "DistributedDataParallel with torchrun (one process per GPU)", decision=decision)


def _behind_flag_off(ctx: "AstContext", node: ast.Call) -> bool:
    """The call runs only when a flag the project leaves off is on: it is in the body of an `if` (or the
    true branch of a conditional expression) whose test is the flag, or an `and` of terms one of which is."""
    off = ctx.project.flags_off
    if not off:
        return False
    child: ast.AST = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, ast.If) and any(child is s for s in parent.body) \
                or isinstance(parent, ast.IfExp) and child is parent.body:
            test = parent.test
            terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
            if any(isinstance(t, ast.Attribute) and t.attr in off for t in terms):
                return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child = parent
    return False
