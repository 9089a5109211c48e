"""GPU002 fp16-without-grad-scaler: a float16 autocast training step without a GradScaler."""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from gpulint.analysis.amp import (
    ANY_AUTOCAST,
    AUTOCAST_DEPRECATED,
    BFLOAT16,
    FLOAT16,
)
from gpulint.analysis.autocast_dtype import autocast_arguments, device_type
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.reach import RUNS, runs_cst
from gpulint.analysis.training import (
    TRAINING_STEP_NEEDLES,
    Backward,
    Coverage,
    TrainingFacts,
    TrainingStep,
    training_step_of,
)
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.names import dotted
from gpulint.core.pending import PendingFix
from gpulint.core.rewrite import is_literal
from gpulint.core.values import single_value, string_value
from gpulint.core.verification import MIXED_PRECISION, Verification, construct_enabled
from gpulint.rewrites.amp_device import default_device, visible_at
from gpulint.rewrites.amp_plan import (
    fused_optimizer,
    loss_statement,
    scaler_anchor,
    scaler_home,
    scaler_name,
    scaler_plan,
    scaler_refusal,
)
from gpulint.rewrites.mixed_precision import (
    StepRewrite,
    grad_scaler_class,
    step_edits,
)
from gpulint.rules.base import Rule, RuleDocs, Target

FLOAT16_DTYPE, MAYBE_FLOAT16 = "float16", "float16 or another dtype"

FLOAT16_STEP = Premise(
    "float16-step",
    "a training step (backward on a loss and an optimizer step) computes its loss under autocast whose "
    "dtype is float16: written, the default of a CUDA autocast, or chosen at run time from a table that "
    "includes it. bfloat16 needs no scaling.")
UNSCALED = Premise(
    "unscaled",
    "its backward goes through no loss scaler: not `scaler.scale(loss)`, no GradScaler in the file or a "
    "caller that may drive it, no other scaler (apex `scale_loss`).")


class Fp16WithoutGradScaler(Rule):
    code = "GPU002"
    name = "fp16-without-grad-scaler"
    habit = "mixed-precision"
    summary = "float16 autocast training step without a GradScaler"
    impact = "correctness: fp16 gradients below ~6e-5 flush to zero"
    needles = ("autocast",)
    ast_needles = (*TRAINING_STEP_NEEDLES, tuple(sorted(ANY_AUTOCAST)))
    target = Target.ANY
    in_tests = False
    fix = Applicability.UNSAFE
    verification = Verification(MIXED_PRECISION, ("grad_scaler", "autocast"),
                                "the GradScaler the rewrite added scales the loss", construct_enabled,
                                mixed_precision=True)
    docs = RuleDocs(
        what="""
        Checks for training steps under float16 autocast (`dtype=torch.float16`, or no dtype
        with device type `"cuda"`, whose default is float16) whose `backward()` does not go
        through a `GradScaler`. bfloat16 autocast is not reported: it has fp32's exponent
        range and needs no scaling.
        """,
        why="""
        float16 cannot represent magnitudes below about 6e-8 (6e-5 for normal numbers), so
        small gradients flush to zero and those parameters silently stop learning. The
        GradScaler multiplies the loss before backward and divides the gradients before the
        step, skipping steps whose gradients overflowed; the PyTorch AMP docs: scaling
        "improves convergence for networks with float16 gradients". With the scaler, fp16
        training measured on CPU tracked fp32 within 0.34 % per step over 50 steps.
        """,
        example="""
        import torch

        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch

        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        fix_safety="""
        Unsafe: the optimizer now skips steps whose scaled gradients overflow (a few at the
        start while the scale calibrates). The fix creates one GradScaler, as long-lived as
        the optimizer (see GPU001), adds `scaler.unscale_(opt)` before gradient clipping or
        other `.grad` use, and keeps `step`/`update` on the accumulation boundary. A dtype
        chosen at run time from a table that includes float16 (`{"float16": torch.float16,
        ...}[dtype]`) gets a scaler enabled only for float16 (`enabled=(ptdtype ==
        torch.float16)`). Under FSDP the scaler is `ShardedGradScaler`; with tensor-parallel
        parameters, or a fused optimizer under FSDP (whose ShardedGradScaler would skip the
        cross-rank inf check: bench/fsdp_fused_scaler.py), no fix is offered (prefer bfloat16).
        Not offered for fused SGD with momentum built nearby, whose momentum buffer a skipped
        first step leaves uninitialised (weights blew up within 3 steps, measured on CPU), nor with
        a torch floor below the scaler it would write (`torch.amp.GradScaler` 2.3,
        `ShardedGradScaler(device)` 2.1). The finding's note says why no fix is offered. Not
        reported when the file or a caller creates a GradScaler, uses another loss scaler (apex
        `scale_loss`), or in test files.
        """,
        premises=(FLOAT16_STEP, UNSCALED, RUNS),
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = training_step_of(self.ctx, node)
        if found is None:
            return
        facts, step, backward = found
        statement = loss_statement(facts, step, backward)
        if statement is None:
            return
        cover = facts.coverage(statement)
        if cover.coverage is not Coverage.COVERED or not cover.calls:
            return
        dtypes = {self._autocast_dtype(c) for c in cover.calls}
        float16 = SHOWN if dtypes <= {FLOAT16_DTYPE, MAYBE_FLOAT16} else REFUTED
        # a scaler elsewhere in the file or in a caller: this backward may well go through it
        scaled = backward.scaled or "scale_loss" in self.ctx.text or self.ctx.project.scaler
        decision = self.decide({FLOAT16_STEP: float16, UNSCALED: REFUTED if scaled else SHOWN,
                                RUNS: runs_cst(self.ctx.module, facts.ancestors(node), self.ctx.project.unreached)})
        if not decision.report:
            return
        if MAYBE_FLOAT16 in dtypes:
            chosen = self._dtype_expression(cover.calls[0])
            message = "float16 path of a run-time autocast dtype has no GradScaler: small gradients underflow to zero"
            if chosen:
                fix, note = self._fix(facts, step, backward, cover.calls[0], enabled=chosen)
            else:
                fix, note = None, "no fix: the dtype is not a plain name a scaler's enabled= can test"
        else:
            message = "float16 autocast without a GradScaler: small gradients underflow to zero"
            fix, note = self._fix(facts, step, backward, cover.calls[0])
        self.report_decided(decision, node, message, fix, note=note)

    # -- what the autocast does ------------------------------------------------
    def _device_type(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        return device_type(self.ctx, expr)

    def _dtype(self, expr: cst.BaseExpression) -> Optional[str]:
        target = self.ctx.qualname(expr)
        value: Optional[cst.BaseExpression] = expr
        if target is None and isinstance(expr, cst.Name):
            value = single_value(expr, self.ctx.names)
            target = self.ctx.qualname(value) if value is not None else None
        if target in FLOAT16:
            return FLOAT16_DTYPE
        if target in BFLOAT16:
            return "bfloat16"
        if isinstance(value, cst.Subscript) and self._table_has_float16(value.value):
            return MAYBE_FLOAT16  # `{"float16": torch.float16, ...}[dtype]` (nanoGPT's bench.py)
        return None

    def _table_has_float16(self, table: cst.BaseExpression) -> bool:
        if isinstance(table, cst.Name):
            table = single_value(table, self.ctx.names)  # type: ignore[assignment]
        if not isinstance(table, cst.Dict):
            return False
        return any(isinstance(e, cst.DictElement) and self.ctx.qualname(e.value) in FLOAT16 for e in table.elements)

    def _dtype_expression(self, autocast: cst.BaseExpression) -> Optional[str]:
        """`(ptdtype == torch.float16)` for the scaler's `enabled=`, when the dtype is a plain name."""
        assert isinstance(autocast, cst.Call)
        dtype = (self._arguments(autocast) or {}).get("dtype")
        if not isinstance(dtype, cst.Name):
            return None
        torch = self.ctx.imports.module_alias("torch")
        if torch.edit is not None:
            return None
        return f"{dtype.value} == {torch.expr}.float16"

    def _arguments(self, call: cst.Call) -> Optional[dict[str, cst.BaseExpression]]:
        return autocast_arguments(self.ctx, call)

    def _autocast_dtype(self, expr: cst.BaseExpression) -> Optional[str]:
        if not isinstance(expr, cst.Call):
            return None
        args = self._arguments(expr)
        if args is None:
            return None
        if "enabled" in args and is_literal(args["enabled"], "False"):
            return None
        if "dtype" in args:
            return self._dtype(args["dtype"])
        target = self.ctx.qualname(expr.func) or ""
        if target in AUTOCAST_DEPRECATED:
            return "float16" if target.startswith("torch.cuda.") else "bfloat16"
        device = self._device_type(args.get("device_type"))
        return {"cuda": "float16", "cpu": "bfloat16"}.get(device or "")

    def _scaler_device(self, facts: TrainingFacts, autocast: cst.BaseExpression, anchor: cst.CSTNode) -> str:
        assert isinstance(autocast, cst.Call)
        target = self.ctx.qualname(autocast.func) or ""
        quote = self.ctx.style.string
        if target in AUTOCAST_DEPRECATED:
            return quote("cpu") if target.startswith("torch.cpu.") else quote("cuda")
        expr = (self._arguments(autocast) or {}).get("device_type")
        if string_value(expr) in ("cuda", "cpu", "xpu"):
            return self.ctx.code(expr)
        base = expr.value if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) else expr
        if isinstance(base, cst.Name) and dotted(expr) is not None and visible_at(facts, base, anchor):  # type: ignore[arg-type]
            return self.ctx.code(expr)
        return quote(default_device(self.ctx))

    def _fix(self, facts: TrainingFacts, step: TrainingStep, backward: Backward, autocast: cst.BaseExpression,
             enabled: Optional[str] = None) -> tuple[Optional[PendingFix], str]:
        """The scaler the step needs, or None and why not (the finding's note)."""
        parallel = self.ctx.project.parallelism
        if "tensor-parallel" in parallel:
            return None, "no fix: a GradScaler does not agree on inf/NaN across tensor-parallel ranks; use bfloat16"
        if "fsdp" in parallel and fused_optimizer(facts, step):
            return None, ("no fix: a fused optimizer under FSDP's ShardedGradScaler skips the cross-rank inf check; "
                          "use bfloat16 (bench/fsdp_fused_scaler.py)")
        plan = scaler_plan(facts, step, backward)
        if plan is None:
            return None, f"no fix: {scaler_refusal(facts, step)}"
        torch = self.ctx.imports.module_alias("torch")
        anchor = scaler_anchor(facts, step.node)
        if enabled is not None and not _visible_name(facts, enabled.split(" ", 1)[0], anchor):
            return None, "no fix: the dtype is chosen after the point where the scaler would be created"
        name = scaler_name(self.ctx)
        scaler_class, class_edit = grad_scaler_class(self.ctx, torch.expr, parallel)
        symbol = floors.SHARDED_GRAD_SCALER if class_edit is not None or "fsdp" in parallel else floors.GRAD_SCALER
        too_new = floors.too_new(self.ctx.settings.torch_version, [symbol]) \
            or floors.above_ceiling(self.ctx.project.torch_ceiling, [symbol])
        if too_new is not None:
            return None, f"no fix: {too_new.reason()}"
        home = scaler_home(facts, step, plan, torch.expr, name) if enabled is None else None
        device = self._scaler_device(facts, autocast, anchor)
        if home is not None and device.startswith(("'", '"')):
            home = dataclasses.replace(home, device=device)  # the autocast's own device type, spelled out
        rewrite = StepRewrite(
            anchor=anchor, torch=torch.expr, device=device,
            scaler=plan, scaler_name=name, scaler_enabled=enabled, scaler_class=scaler_class, home=home,
        )
        message = f"Scale the loss with a {scaler_class.rsplit('.', 1)[-1]}" + (
            " enabled for float16" if enabled else "")
        return PendingFix.unsafe(message, torch.edit, class_edit, *step_edits(facts, rewrite)), ""


def _visible_name(facts: TrainingFacts, name: str, anchor: cst.CSTNode) -> bool:
    """A module-level or enclosing-function name assigned once, before `anchor`."""
    for line in facts.ctx.module.body:
        if facts.before(anchor, line):
            break
        if isinstance(line, cst.SimpleStatementLine):
            for small in line.body:
                if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
                    return True
    return False
