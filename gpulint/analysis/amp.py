"""Qualified names of the mixed-precision API, old and new, shared by several rules."""

from __future__ import annotations

import libcst as cst

from gpulint.engine.context import FileContext

AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
AUTOCAST_DEPRECATED = frozenset({
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast",
})
GRAD_SCALER = frozenset({"torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
GRAD_SCALER_DEPRECATED = frozenset({
    "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
})
SHARDED_GRAD_SCALER = frozenset({"torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler"})
ANY_GRAD_SCALER = GRAD_SCALER | GRAD_SCALER_DEPRECATED | SHARDED_GRAD_SCALER


class _ScalerCalls(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if not self.found and self.ctx.qualname(node.func) in ANY_GRAD_SCALER:
            self.found = True


def creates_grad_scaler(ctx: FileContext) -> bool:
    """The file constructs a GradScaler (any flavour) somewhere."""
    if "GradScaler" not in ctx.text:
        return False
    scan = _ScalerCalls(ctx)
    ctx.module.visit(scan)
    return scan.found
