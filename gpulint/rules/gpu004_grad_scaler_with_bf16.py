"""GPU004 grad-scaler-with-bf16: a GradScaler scales the loss of a bfloat16 autocast step."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.amp import ANY_AUTOCAST, GRAD_SCALER, GRAD_SCALER_DEPRECATED, Coverage
from gpulint.analysis.amp_dtypes import (
    BFLOAT16_DTYPE,
    FLOAT16_DTYPE,
    autocast_arguments,
    autocast_dtype,
    dtype_choices,
)
from gpulint.analysis.amp_regions import AmpRegions, amp_regions
from gpulint.analysis.ast_context import AstContext, Detection, dotted
from gpulint.analysis.ast_values import single_value
from gpulint.analysis.evidence import SHOWN, Premise
from gpulint.core.edits import Applicability
from gpulint.core.verification import UNSCALED_BFLOAT16, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

SCALERS = GRAD_SCALER | GRAD_SCALER_DEPRECATED
# GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled);
# torch.cuda.amp.GradScaler has no device: enabled is one place earlier
ENABLED_POSITION = {True: 4, False: 5}

BFLOAT16_STEPS = Premise(
    "bfloat16-steps",
    "every backward in the file that goes through this scaler (`scaler.scale(loss).backward()`) computes "
    "its loss under autocast whose dtype is bfloat16: written, or chosen at run time from bfloat16 and "
    "float16 (then only its bfloat16 path is claimed), and no autocast in the file runs another dtype. "
    "A dtype gpulint cannot read, or a scaler whose backward it cannot see, is undecided.")
SCALER_ENABLED = Premise(
    "scaler-enabled",
    "the GradScaler is constructed without `enabled=` (positional or keyword, or a `**dict` that may hold "
    "it): it scales, unscales and checks for inf/NaN on every step.")


class GradScalerWithBf16(Rule):
    code = "GPU004"
    name = "grad-scaler-with-bf16"
    habit = "mixed-precision"
    summary = "GradScaler around a bfloat16 autocast step (bfloat16 needs no loss scaling)"
    impact = ("a scale, an unscale and an inf/NaN check with a host read per step, for nothing "
              "(HF transformers#21428; nsys in WeatherGenerator#874)")
    needles = ("GradScaler",)
    ast_needles = (tuple(sorted(SCALERS)), ("torch.bfloat16",))
    target = Target.ANY
    in_tests = False
    fix = Applicability.SAFE
    preview = True
    verification = Verification(UNSCALED_BFLOAT16, ("grad_scaler", "autocast"),
                                "the GradScaler the fix switched off is built disabled while bfloat16 autocast runs",
                                lambda kind, details: kind != "grad_scaler" or details.get("enabled") is False,
                                mixed_precision=True)
    docs = RuleDocs(
        what="""
        Checks for a `GradScaler` constructed without `enabled=` whose every use in the
        file scales the loss of a training step under `torch.autocast(..., dtype=torch.bfloat16)`.
        When the dtype is chosen at run time from bfloat16 and float16
        (`amp_dtype = torch.bfloat16 if bf16 else torch.float16`), the finding is about the
        bfloat16 path.
        """,
        why="""
        Loss scaling exists because float16's exponent range is narrow: small gradients
        flush to zero. bfloat16 has float32's 8-bit exponent range, so nothing underflows
        that fp32 would keep, and the AMP docs pair GradScaler with float16 only. The scaler
        still multiplies the loss, unscales every gradient and runs an inf/NaN check with a
        device-to-host read on every step (the cost shows in nsys traces, WeatherGenerator#874;
        discussed for bf16 in HF transformers#21428 and accelerate#1036).
        """,
        example="""
        import torch

        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        use_instead="""
        import torch

        scaler = torch.amp.GradScaler("cuda", enabled=False)
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        fix_safety="""
        Safe in practice: the fix adds `enabled=False` (or `enabled=(amp_dtype ==
        torch.float16)` when the dtype is a name chosen at run time, visible where the
        scaler is built), so every `scaler.*` call stays valid and becomes a pass-through.
        Scaling by a power of two is exact in bfloat16, so the gradients the optimizer sees
        are the same. What changes: a step whose gradients hold inf/NaN is applied instead
        of skipped (in bfloat16 such a step means divergence, not a scale to back off from),
        `scaler.get_scale()` reads 1.0, and `scaler.state_dict()` is empty (loading an old
        one is ignored). Not reported when the scaler has `enabled=`, when an autocast in
        the file is float16 or of a dtype gpulint cannot read, when the scaler's backward is
        not in the file, under a framework that owns the loop, or in test files.
        """,
        premises=(BFLOAT16_STEPS, SCALER_ENABLED),
        fix_cases=(
            FixCase("bfloat16 autocast step: the scaler is built with `enabled=False`",
                    Applicability.SAFE, "bf16_step_scaler_disabled.py"),
            FixCase("dtype chosen at run time from bfloat16 and float16: `enabled=(amp_dtype == torch.float16)`",
                    Applicability.SAFE, "runtime_dtype_scaler_enabled_for_float16.py"),
            FixCase("the dtype is chosen after the scaler is built",
                    None, "runtime_dtype_chosen_later_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if ctx.qualname(node.func) in SCALERS:
                self._check(ctx, node)

    def _check(self, ctx: AstContext, node: ast.Call) -> None:
        target = ctx.qualname(node.func)
        kwargs = ctx.kwargs(node)
        if kwargs.passed("enabled") or not kwargs.complete or len(node.args) > ENABLED_POSITION[
                target in GRAD_SCALER_DEPRECATED] or any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg is None for k in node.keywords):
            return  # the user chose (or may have chosen) when it is on
        facts = ctx.analysis(amp_regions)
        if facts.framework_owned:
            return
        name = _assigned_name(ctx, node)
        if name is None:
            return
        dtype = _dtype_of_steps(ctx, facts, name)
        if dtype is None:
            return
        decision = self.decide({BFLOAT16_STEPS: SHOWN, SCALER_ENABLED: SHOWN})
        enabled: Optional[str]
        if dtype == BFLOAT16_DTYPE:
            enabled, message = "False", "GradScaler around a bfloat16 autocast step: bfloat16 needs no loss scaling"
            note = ""
        else:
            message = ("GradScaler stays on for the bfloat16 choice of a run-time autocast dtype: "
                       "bfloat16 needs no scaling")
            enabled, note = _enabled_for_float16(ctx, facts, node, dtype)
        ctx.report(self, node, message, fix=Applicability.SAFE if enabled is not None else None,
                   fix_message=f"Construct the scaler with `enabled={enabled}`" if enabled is not None else "",
                   data={"enabled": enabled}, note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword

        assert isinstance(node, cst.Call) and detection.data is not None
        return PendingFix.safe(detection.fix_message, Replace(node, add_keyword(node, "enabled",
                                                                                detection.data["enabled"])))


def _dtype_of_steps(ctx: AstContext, facts: AmpRegions, name: str) -> Optional[str]:
    """BFLOAT16_DTYPE when every step this scaler scales is bfloat16; the dtype name's code when every
    one runs a run-time choice of bfloat16 or float16 through that one name; else None."""
    kinds: set[str] = set()
    for call in facts.calls:
        if ctx.qualname(call.func) in ANY_AUTOCAST:
            kinds.add(_kind(ctx, call))
    if len(kinds) != 1 or "" in kinds:
        return None  # no autocast, a float16 or unreadable one, or two different choices
    used = False
    for step in facts.steps:
        for backward in step.backwards:
            scaler = _scaler_of(backward.call)
            if scaler is None or dotted(scaler) != name:
                continue
            cover = facts.coverage(facts.loss_statement(step, backward))
            if cover.coverage is not Coverage.COVERED or not cover.calls:
                return None  # a step in fp32: another problem, not this one
            if {_kind(ctx, c) for c in cover.calls} != kinds:
                return None
            used = True
    return next(iter(kinds)) if used else None


def _kind(ctx: AstContext, autocast: ast.expr) -> str:
    """BFLOAT16_DTYPE, the code of a dtype name chosen from bfloat16 and float16, or "" for anything else."""
    dtype = autocast_dtype(ctx, autocast)
    if dtype == BFLOAT16_DTYPE:
        return BFLOAT16_DTYPE
    if dtype is None or dtype == FLOAT16_DTYPE or not isinstance(autocast, ast.Call):
        return ""
    chosen = (autocast_arguments(ctx, autocast) or {}).get("dtype")
    if not isinstance(chosen, ast.Name):
        return ""
    choices = dtype_choices(ctx, chosen)
    if choices is None or not {BFLOAT16_DTYPE, FLOAT16_DTYPE} <= choices:
        return ""
    return chosen.id


def _enabled_for_float16(ctx: AstContext, facts: AmpRegions, scaler: ast.Call, dtype: str) -> tuple[Optional[str], str]:
    """`(amp_dtype == torch.float16)` when the dtype's name holds its value where the scaler is built."""
    torch = next((alias for alias, targets in ctx.names.module_scope.bindings.items()
                  if len(set(targets)) == 1 and targets[0] == "torch"), None)
    if torch is None:  # the fix would have to add an import (core/pending.py ImportPlanner.module_alias)
        return None, "no fix: the file does not import torch under a name the test could use"
    for call in facts.calls:
        if ctx.qualname(call.func) not in ANY_AUTOCAST:
            continue
        chosen = (autocast_arguments(ctx, call) or {}).get("dtype")
        if not isinstance(chosen, ast.Name) or chosen.id != dtype:
            continue
        value = single_value(chosen, ctx.names)
        scope = facts.scope_of(value) if value is not None else None
        if value is None or not facts.before(value, scaler) or not any(
                scope is s for s in (ctx.tree, facts.scope_of(scaler))):
            return None, "no fix: the dtype is chosen after the point where the scaler is built"
    return f"({dtype} == {torch}.float16)", ""


def _assigned_name(ctx: AstContext, call: ast.Call) -> Optional[str]:
    """`scaler` / `self.scaler` for `scaler = GradScaler(...)`; None for any other use of the call."""
    parent = ctx.parent(call)
    if not isinstance(parent, ast.Assign) or len(parent.targets) != 1 or parent.value is not call:
        return None
    return dotted(parent.targets[0])


def _scaler_of(backward: ast.Call) -> Optional[ast.expr]:
    """`scaler` in `scaler.scale(loss).backward()`."""
    func = backward.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        inner = func.value.func
        if isinstance(inner, ast.Attribute) and inner.attr == "scale":
            return inner.value
    return None
