"""GPU002 fp16-without-grad-scaler: a float16 autocast training step without a GradScaler."""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.amp import (
    ANY_AUTOCAST,
    AUTOCAST_DEPRECATED,
    BFLOAT16,
    FLOAT16,
    Coverage,
)
from gpulint.analysis.amp_dtypes import device_type, enabled_autocast_arguments
from gpulint.analysis.amp_fix import scaler_fix
from gpulint.analysis.amp_regions import amp_regions
from gpulint.analysis.amp_steps import TRAINING_STEP_NEEDLES
from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.ast_values import single_value
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.reach import RUNS, runs
from gpulint.core.edits import Applicability
from gpulint.core.verification import MIXED_PRECISION, Verification, construct_enabled
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.training import Backward, TrainingFacts, TrainingStep
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

FLOAT16_DTYPE, MAYBE_FLOAT16 = "float16", "float16 or another dtype"
MESSAGE = "float16 autocast without a GradScaler: small gradients underflow to zero"
MAYBE_MESSAGE = "float16 path of a run-time autocast dtype has no GradScaler: small gradients underflow to zero"

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
        fix_cases=(
            FixCase("float16 autocast, unscaled backward: GradScaler added",
                    Applicability.UNSAFE, "fp16_autocast_without_scaler.py"),
            FixCase("dtype from a table that includes float16: a scaler enabled only for float16",
                    Applicability.UNSAFE, "dtype_from_table_scaler_enabled_for_float16.py"),
            FixCase("fused SGD with momentum (a skipped first step leaves its momentum buffer uninitialised)",
                    None, "fused_sgd_momentum_reported_without_fix.py"),
            FixCase("the optimizer stepped is a wrapper, not a torch optimizer (no `param_groups` for the scaler)",
                    None, "optimizer_wrapper_reported_without_fix.py"),
            FixCase("`torch-version` below 2.3",
                    None, "old_torch_version_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        facts = ctx.analysis(amp_regions)
        if facts.framework_owned:
            return
        for step in facts.steps:
            for backward in step.backwards:
                cover = facts.coverage(facts.loss_statement(step, backward))
                if cover.coverage is not Coverage.COVERED or not cover.calls:
                    continue
                dtypes = {_autocast_dtype(ctx, c) for c in cover.calls}
                float16 = SHOWN if dtypes <= {FLOAT16_DTYPE, MAYBE_FLOAT16} else REFUTED
                # a scaler elsewhere in the file or in a caller: this backward may well go through it
                scaled = backward.scaled or "scale_loss" in ctx.text or ctx.project.scaler
                decision = self.decide({FLOAT16_STEP: float16, UNSCALED: REFUTED if scaled else SHOWN,
                                        RUNS: runs(ctx, backward.call)})
                if not decision.report:
                    continue
                if not self.in_tests and not ctx.settings.lint_tests and ctx.in_test_function(backward.call):
                    continue  # ctx.report would drop it: no LibCST parse for it
                maybe = MAYBE_FLOAT16 in dtypes
                forecast = scaler_fix(ctx, facts, step, backward, cover.calls[0], maybe)
                ctx.report(self, backward.call, MAYBE_MESSAGE if maybe else MESSAGE, fix=forecast.applicability,
                           fix_message=forecast.message, note=forecast.note, decision=decision,
                           data=forecast.decisions)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        from gpulint.analysis.training import training_step_of
        from gpulint.rewrites.amp_plan import loss_statement

        found = training_step_of(fctx, node)  # type: ignore[arg-type]
        assert detection.data is not None
        if found is None:
            return None
        facts, step, backward = found
        statement = loss_statement(facts, step, backward)
        cover = facts.coverage(statement) if statement is not None else None
        if cover is None or not cover.calls:
            return None  # the trees read the step differently: the engine reports it
        return self._build(fctx, facts, step, backward, cover.calls[0], detection.data["enabled"],
                           detection.fix_message)

    # -- the fix (LibCST) ------------------------------------------------------
    @staticmethod
    def _scaler_device(fctx: "FileContext", facts: "TrainingFacts", autocast: "cst.BaseExpression",
                       anchor: "cst.CSTNode") -> str:
        import libcst as cst

        from gpulint.analysis.autocast_dtype import autocast_arguments as cst_arguments
        from gpulint.core.names import dotted
        from gpulint.core.values import string_value
        from gpulint.rewrites.amp_device import default_device, visible_at

        assert isinstance(autocast, cst.Call)
        target = fctx.qualname(autocast.func) or ""
        quote = fctx.style.string
        if target in AUTOCAST_DEPRECATED:
            return quote("cpu") if target.startswith("torch.cpu.") else quote("cuda")
        expr = (cst_arguments(fctx, autocast) or {}).get("device_type")
        if expr is None:
            return quote(default_device(fctx))
        if string_value(expr) in ("cuda", "cpu", "xpu"):
            return fctx.code(expr)
        base = expr.value if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) else expr
        if isinstance(base, cst.Name) and dotted(expr) is not None and visible_at(facts, base, anchor):
            return fctx.code(expr)
        return quote(default_device(fctx))

    def _build(self, fctx: "FileContext", facts: "TrainingFacts", step: "TrainingStep", backward: "Backward",
               autocast: "cst.BaseExpression", enabled: Optional[str], message: str) -> Optional["PendingFix"]:
        """The scaler the step needs, on LibCST (which it edits), as analysis/amp_fix.py decided it on `ast`
        (`enabled`: the scaler's `enabled=` for a dtype chosen at run time); None where LibCST reads the
        step differently (the engine reports that as a bug)."""
        from gpulint.core.pending import PendingFix
        from gpulint.rewrites.amp_plan import scaler_anchor, scaler_home, scaler_name, scaler_plan
        from gpulint.rewrites.mixed_precision import StepRewrite, grad_scaler_class, step_edits

        plan = scaler_plan(facts, step, backward)
        if plan is None:
            return None
        torch = fctx.imports.module_alias("torch")
        anchor = scaler_anchor(facts, step.node)
        name = scaler_name(fctx)
        scaler_class, class_edit = grad_scaler_class(fctx, torch.expr, fctx.project.parallelism)
        home = scaler_home(facts, step, plan, torch.expr, name) if enabled is None else None
        device = self._scaler_device(fctx, facts, autocast, anchor)
        if home is not None and device.startswith(("'", '"')):
            home = dataclasses.replace(home, device=device)  # the autocast's own device type, spelled out
        rewrite = StepRewrite(
            anchor=anchor, torch=torch.expr, device=device,
            scaler=plan, scaler_name=name, scaler_enabled=enabled, scaler_class=scaler_class, home=home,
        )
        return PendingFix.unsafe(message, torch.edit, class_edit, *step_edits(facts, rewrite))


# -- what the autocast does (on `ast`) -----------------------------------------
def _autocast_dtype(ctx: AstContext, expr: ast.expr) -> Optional[str]:
    """float16, bfloat16, MAYBE_FLOAT16 (a run-time choice from a table holding float16), or None: disabled,
    or a dtype the file does not show."""
    args = enabled_autocast_arguments(ctx, expr)
    if args is None or not isinstance(expr, ast.Call):
        return None
    if "dtype" in args:
        return _dtype(ctx, args["dtype"])
    target = ctx.qualname(expr.func) or ""
    if target in AUTOCAST_DEPRECATED:
        return "float16" if target.startswith("torch.cuda.") else "bfloat16"
    device = device_type(ctx, args.get("device_type"))
    return {"cuda": "float16", "cpu": "bfloat16"}.get(device or "")


def _dtype(ctx: AstContext, expr: ast.expr) -> Optional[str]:
    target = ctx.qualname(expr)
    value: Optional[ast.expr] = expr
    if target is None and isinstance(expr, ast.Name):
        value = single_value(expr, ctx.names)
        target = ctx.qualname(value) if value is not None else None
    if target in FLOAT16:
        return FLOAT16_DTYPE
    if target in BFLOAT16:
        return "bfloat16"
    if isinstance(value, ast.Subscript) and _table_has_float16(ctx, value.value):
        return MAYBE_FLOAT16  # `{"float16": torch.float16, ...}[dtype]` (nanoGPT's bench.py)
    return None


def _table_has_float16(ctx: AstContext, table: Optional[ast.expr]) -> bool:
    if isinstance(table, ast.Name):
        table = single_value(table, ctx.names)
    if not isinstance(table, ast.Dict):
        return False
    return any(key is not None and ctx.qualname(value) in FLOAT16 for key, value in zip(table.keys, table.values))
