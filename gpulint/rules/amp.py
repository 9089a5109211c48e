"""Mixed-precision rules: GPU001 missing autocast, GPU002 fp16 without GradScaler, GPU003 deprecated AMP API."""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from gpulint.analysis.amp import (
    ANY_AUTOCAST,
    AUTOCAST_DEPRECATED,
    BFLOAT16,
    DEPRECATED_AMP,
    DEPRECATED_AMP_MODULES,
    FLOAT16,
    OLD_AUTOCAST_ORDER,
)
from gpulint.analysis.guards import version_guarded
from gpulint.analysis.names import dotted
from gpulint.analysis.training import (
    Backward,
    Coverage,
    TrainingFacts,
    TrainingStep,
    positional,
    training_facts,
)
from gpulint.analysis.values import single_value
from gpulint.engine.context import FileContext
from gpulint.engine.fixes import Applicability
from gpulint.engine.pending import PendingEdit, PendingFix
from gpulint.engine.rewrite import is_literal
from gpulint.rules.amp_rewrite import (
    Region,
    ScalerHome,
    ScalerPlan,
    StepRewrite,
    autocast_region,
    refused_ops,
    scaler_home,
    step_edits,
    device_type_code,
    loss_passed_in,
    loss_statement,
    scaler_anchor,
    scaler_name,
    scaler_plan,
    step_edit,
    visible_at,
)
from gpulint.rules.amp_uses import DeprecatedAmpFixes
from gpulint.rules.base import Rule, RuleDocs, Target

GRAD_SCALER_SINCE = (2, 3)
SHARDED_SCALER_MODULE = "torch.distributed.fsdp.sharded_grad_scaler"
FLOAT16_DTYPE, MAYBE_FLOAT16 = "float16", "float16 or another dtype"
# a training step needs a backward call and an optimizer step (analysis/training.py)
TRAINING_STEP_NEEDLES = ((".backward(", "torch.autograd.backward"), (".step(",))
AUTOCAST_SINCE = (1, 10)


def _string(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


class _StepRule(Rule):
    """Shared: find the training step a backward call belongs to."""

    in_tests = False

    def step_at(self, node: cst.Call) -> Optional[tuple[TrainingFacts, TrainingStep, Backward]]:
        facts = self.ctx.analysis(training_facts)
        entry = facts.by_backward.get(id(node))
        if entry is None or facts.framework_owned:
            return None
        return facts, entry[0], entry[1]


class MissingAutocast(_StepRule):
    code = "GPU001"
    name = "missing-autocast"
    summary = "Training step runs its forward pass and loss in fp32 (no autocast)"
    impact = "up to 3x step speed on Volta and newer (PyTorch Tuning Guide); 2-3x (AMP recipe)"
    needles = ("backward",)
    ast_needles = TRAINING_STEP_NEEDLES
    target = Target.GPU
    fix = Applicability.UNSAFE
    docs = RuleDocs(
        what="""
        Checks for training steps (a loop or function that calls `backward()` on a loss and
        steps an optimizer) whose forward pass and loss are not computed under
        `torch.autocast`, in files that show they run on a GPU. Reported at the
        `backward()` call.
        """,
        why="""
        Without autocast every matmul and convolution runs in fp32 and the GPU's tensor
        cores sit idle. Mixed precision runs them in float16/bfloat16 and keeps fp32 where
        precision matters: the PyTorch Performance Tuning Guide quotes "up to 3x overall
        speedup on Volta and newer GPU architectures", the PyTorch AMP recipe 2-3x, and the
        PyTorch AMP blog (2020) measured 1.5x-5.5x on V100 over fp32. Activations saved
        for backward are mostly stored in 16 bits, which also lowers memory use. On CPU with torch 2.14, fp16 + GradScaler and bf16
        training of small MLPs and CNNs tracked fp32 within 0.7 % per step over 50 steps.
        """,
        example="""
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """,
        use_instead="""
        scaler = torch.amp.GradScaler(device.type)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=torch.float16):
                output = model(data)
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        fix_safety="""
        Unsafe: numerics change (16-bit activations). The fix wraps the forward pass and the
        loss: from the first statement that calls the model and that the loss depends on,
        through the loss assignment. Building a model or an optimizer and waiting on futures
        are never inside; when such a line sits between forward statements, or the loss is
        computed inside the `backward()` call, no fix is offered. `backward()` stays outside.
        The dtype comes from the `amp-dtype` setting: `float16` (default, every CUDA GPU) also
        routes backward, gradient clipping (`unscale_`) and the optimizer step through one
        GradScaler, on the accumulation boundary when the step is conditional; `bfloat16`
        (Ampere and newer) needs none. The scaler lives as long as the optimizer: beside a
        global optimizer; or, when `train()` receives the optimizer from a function of the
        file, created there, passed in (`scaler=None` keeps other callers working) and saved
        and loaded with the optimizer's state in checkpoint dicts; else before the step's
        loop, and the message says what to move. Sharded parameters (FSDP) get
        `ShardedGradScaler`, which agrees on inf/NaN across ranks; tensor-parallel (DTensor)
        parameters get bfloat16 and no scaler. `nn.BCELoss` / `F.binary_cross_entropy`, which
        CUDA autocast refuses ("unsafe to autocast"), stay outside the region with their
        inputs cast to float32; inside a helper of the step, no fix. The device type is the
        script's own (`device.type`, `torch.device(args.device).type`) when it can be seen,
        else `"cuda"`. No float16 fix with a `torch-version` floor below 2.3, when the step is
        too irregular for one scaler path (several backward calls or optimizers, gradients
        clipped on every micro-step but stepped on a boundary), or when fused SGD with
        momentum, which a skipped scaled step corrupts, is built in the file or a module of
        the project around it.

        Not reported in test files (`lint-tests`), when mixed precision is done another way in
        the file, its callers or the modules either imports (a GradScaler, FSDP
        `MixedPrecision`/`MixedPrecisionPolicy`, a model cast or loaded in 16 bits
        (`from_pretrained(..., torch_dtype=torch.bfloat16)`), layers computing in
        their input's dtype, apex, DeepSpeed), when the file uses autocast in a way gpulint
        cannot link to the step, when a framework (Lightning, Accelerate, Fabric, DeepSpeed)
        owns the loop, in a function handed the loss (a loss scaler's `__call__`), in
        reinforcement-learning loops (the file imports an environment package), or with sparse
        tensors, which autocast does not cover. One finding per training step.
        """,
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = self.step_at(node)
        if found is None:
            return
        facts, step, backward = found
        if step.backwards[0] is not backward:
            return  # one finding per training step, at its first backward()
        if facts.low_precision_model or self._precision_handled():
            return
        for each in step.backwards:
            statement = loss_statement(facts, step, each)
            if statement is None or facts.coverage(statement).coverage is not Coverage.NOT_COVERED:
                return
            if loss_passed_in(facts, each):
                return  # a helper handed the loss (a loss scaler's __call__): the forward pass is the caller's
        fix, note = self._fix(facts, step, backward)
        self.report(
            node,
            "training step computes its forward pass and loss in fp32: wrap them in torch.autocast "
            f"(mixed precision is up to 3x faster on tensor-core GPUs){note}",
            fix,
        )

    def _precision_handled(self) -> bool:
        """16-bit training done another way in or around the file, or a loop bound by its environment."""
        project = self.ctx.project
        if project.own.rl:
            return True  # the step waits on a simulator; small policy nets gain nothing (AMP recipe)
        if project.own.sparse:
            return True  # sparse kernels are outside autocast: mixing them with 16-bit activations fails
        # a GradScaler, FSDP MixedPrecision(Policy), a model cast to 16 bits, layers that compute in
        # their input's dtype, apex, DeepSpeed: here, in a caller, or in a module either imports
        return bool(project.mixed_precision)

    def _fix(self, facts: TrainingFacts, step: TrainingStep, backward: Backward) -> tuple[Optional[PendingFix], str]:
        """The rewrite, or None and the reason (appended to the message) when no rewrite is right."""
        settings = self.ctx.settings
        dtype = settings.amp_dtype
        floor = settings.torch_version
        parallel = self.ctx.project.parallelism
        if "tensor-parallel" in parallel:
            dtype = "bfloat16"  # DTensor gradients: a GradScaler would not agree on inf/NaN across ranks
        region = autocast_region(facts, step, backward)
        if region is None:
            return None, "; no fix: the forward pass and the loss cannot be told apart from the rest of the step"
        region, float_calls, why = _outside_autocast(facts, region)
        if region is None:
            return None, why
        plan = None
        if dtype == "float16":
            if floor is not None and floor < GRAD_SCALER_SINCE:
                return None, f"; no float16 fix: torch.amp.GradScaler needs torch 2.3 (torch-version is {_floor(floor)})"
            if not backward.scaled:
                plan = scaler_plan(facts, step, backward)
                if plan is None:
                    return None, ("; no float16 fix: the step's backward/optimizer calls are too irregular for a "
                                  "GradScaler, or fused SGD with momentum (unsafe under one) is built nearby")
        elif floor is not None and floor < AUTOCAST_SINCE:
            return None, ""
        anchor = scaler_anchor(facts, step.node)
        torch = self.ctx.imports.module_alias("torch")
        name = scaler_name(self.ctx)
        scaler_class, class_edit = _scaler_class(self.ctx, torch.expr, parallel)
        home = scaler_home(facts, step, plan, torch.expr, name) if plan is not None else None
        rewrite = StepRewrite(
            anchor=anchor, torch=torch.expr, device=device_type_code(facts, step, anchor, torch.expr),
            region=region, dtype=dtype, scaler=plan, scaler_name=name, scaler_class=scaler_class, home=home,
            float_calls=float_calls,
        )
        message = f"Wrap the forward pass and loss in `torch.autocast` ({dtype})"
        if plan is not None:
            message += f" and scale the loss with a {scaler_class.rsplit('.', 1)[-1]}"
        if float_calls:
            message += "; binary_cross_entropy stays outside autocast, in float32"
        note = self._lifetime_note(step, plan, home)
        return PendingFix.unsafe(message, torch.edit, class_edit, *step_edits(facts, rewrite)), note

    def _lifetime_note(self, step: TrainingStep, plan: Optional[ScalerPlan], home: Optional[ScalerHome]) -> str:
        facts = self.ctx.analysis(training_facts)
        function = facts.scope_of(step.node)
        if plan is None or home is not None or not isinstance(function, cst.FunctionDef) \
                or isinstance(step.node, cst.FunctionDef):
            return ""
        return (f"; the fix creates the GradScaler each time {function.name.value}() runs: create it once where "
                "the optimizer is made, pass it in, and save scaler.state_dict() with the optimizer's")


def _scaler_class(ctx: FileContext, torch: str, parallel: frozenset[str]) -> tuple[str, Optional[PendingEdit]]:
    """`torch.amp.GradScaler`, or FSDP's ShardedGradScaler, which agrees on inf/NaN across ranks."""
    if "fsdp" in parallel:
        reference = ctx.imports.reference(SHARDED_SCALER_MODULE, "ShardedGradScaler", prefer_from=True)
        return reference.expr, reference.edit
    return f"{torch}.amp.GradScaler", None


def _floor(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _outside_autocast(facts: TrainingFacts, region: Region) -> tuple[Optional[Region], tuple[cst.Call, ...], str]:
    """Keep what CUDA autocast refuses (binary_cross_entropy) out of the region, or say why that is impossible."""
    body = region.container.body
    refusal = "; no fix: binary_cross_entropy raises under CUDA autocast (\"unsafe to autocast\")"
    for index in range(region.start, region.end + 1):
        found = refused_ops(facts, body[index])
        if found.indirect:
            return None, (), f"{refusal}, and {found.indirect[0]}() computes it inside the step: call it on float32 " \
                             "tensors outside the autocast region, or use binary_cross_entropy_with_logits"
        if found.direct and index != region.end:
            return None, (), f"{refusal} and is mixed into the forward pass here"
        if found.direct:
            if index == region.start:
                return None, (), f"{refusal} and is computed in the same statement as the forward pass"
            return Region(region.container, region.start, region.end - 1), found.direct, ""
    return region, (), ""


class Fp16WithoutGradScaler(_StepRule):
    code = "GPU002"
    name = "fp16-without-grad-scaler"
    summary = "float16 autocast training step without a GradScaler"
    impact = "correctness: fp16 gradients below ~6e-5 flush to zero"
    needles = ("autocast",)
    ast_needles = (*TRAINING_STEP_NEEDLES, tuple(sorted(ANY_AUTOCAST)))
    target = Target.ANY
    fix = Applicability.UNSAFE
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
        training on CPU (torch 2.14) tracked fp32 within 0.34 % per step over 50 steps.
        """,
        example="""
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
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
        parameters no fix is offered (prefer bfloat16). Not offered for fused SGD with momentum
        built nearby, whose momentum buffer a skipped first step leaves uninitialised (weights
        blew up within 3 steps on torch 2.14), nor with a `torch-version` floor below 2.3. Not
        reported when the file or a caller creates a GradScaler, uses another loss scaler (apex
        `scale_loss`), or in test files.
        """,
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = self.step_at(node)
        if found is None:
            return
        facts, step, backward = found
        if backward.scaled or "scale_loss" in self.ctx.text:
            return
        statement = loss_statement(facts, step, backward)
        if statement is None:
            return
        cover = facts.coverage(statement)
        if cover.coverage is not Coverage.COVERED or not cover.calls:
            return
        dtypes = {self._autocast_dtype(c) for c in cover.calls}
        if not dtypes <= {FLOAT16_DTYPE, MAYBE_FLOAT16}:
            return
        if self.ctx.project.scaler:
            return  # a scaler elsewhere in the file or in a caller: this backward may well go through it
        if MAYBE_FLOAT16 in dtypes:
            chosen = self._dtype_expression(cover.calls[0])
            message = ("autocast dtype chosen at run time from a table that includes float16, without a GradScaler: "
                       "on the float16 path small gradients underflow to zero; add a GradScaler enabled for float16")
            fix = self._fix(facts, step, backward, cover.calls[0], enabled=chosen) if chosen else None
        else:
            message = ("float16 autocast without a GradScaler: small gradients underflow to zero; "
                       "scale the loss with torch.amp.GradScaler")
            fix = self._fix(facts, step, backward, cover.calls[0])
        self.report(node, message, fix)

    # -- what the autocast does ------------------------------------------------
    def _device_type(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        """"cuda"/"cpu" when the device type is visible ("cuda" if a GPU is used when present)."""
        if expr is None:
            return None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "type" and isinstance(expr.value, cst.Name):
            value = single_value(expr.value, self.ctx.names)
            if isinstance(value, cst.Call) and self.ctx.qualname(value.func) == "torch.device" and value.args:
                return self._device_type(value.args[0].value)
            return None
        if isinstance(expr, cst.Name):
            return self._device_type(single_value(expr, self.ctx.names))
        if isinstance(expr, cst.IfExp):
            kinds = {self._device_type(expr.body), self._device_type(expr.orelse)}
            return "cuda" if "cuda" in kinds else None
        value = _string(expr)
        if value is None:
            return None
        kind = value.split(":")[0]
        return kind if kind in ("cuda", "cpu") else None

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
        kwargs = self.ctx.kwargs(call)
        if not kwargs.complete or any(a.star == "*" for a in call.args):
            return None
        deprecated = self.ctx.qualname(call.func) in AUTOCAST_DEPRECATED
        order = OLD_AUTOCAST_ORDER if deprecated else ("device_type", "dtype", "enabled", "cache_enabled")
        out: dict[str, cst.BaseExpression] = {}
        for index, value in enumerate(positional(call)):
            if index < len(order):
                out[order[index]] = value
        for key, value in kwargs.values.items():
            if value is None:
                return None
            out[key] = value
        return out

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
        if target in AUTOCAST_DEPRECATED:
            return '"cpu"' if target.startswith("torch.cpu.") else '"cuda"'
        expr = (self._arguments(autocast) or {}).get("device_type")
        if _string(expr) in ("cuda", "cpu"):
            return self.ctx.code(expr)  # type: ignore[arg-type]
        base = expr.value if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) else expr
        if isinstance(base, cst.Name) and dotted(expr) is not None and visible_at(facts, base, anchor):  # type: ignore[arg-type]
            return self.ctx.code(expr)  # type: ignore[arg-type]
        return '"cuda"'

    def _fix(self, facts: TrainingFacts, step: TrainingStep, backward: Backward,
             autocast: cst.BaseExpression, enabled: Optional[str] = None) -> Optional[PendingFix]:
        floor = self.ctx.settings.torch_version
        if floor is not None and floor < GRAD_SCALER_SINCE:
            return None
        parallel = self.ctx.project.parallelism
        if "tensor-parallel" in parallel:
            return None  # DTensor gradients: prefer bfloat16 autocast, which needs no scaler
        plan = scaler_plan(facts, step, backward)
        if plan is None:
            return None
        anchor = scaler_anchor(facts, step.node)
        torch = self.ctx.imports.module_alias("torch")
        if enabled is not None and not _visible_name(facts, enabled.split(" ", 1)[0], anchor):
            return None  # the dtype is chosen after the point where the scaler is created
        name = scaler_name(self.ctx)
        scaler_class, class_edit = _scaler_class(self.ctx, torch.expr, parallel)
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
        return PendingFix.unsafe(message, torch.edit, class_edit, *step_edits(facts, rewrite))


class DeprecatedCudaAmp(Rule):
    code = "GPU003"
    name = "deprecated-cuda-amp"
    summary = "torch.cuda.amp / torch.cpu.amp API (deprecated since torch 2.4)"
    impact = "hygiene: removes the FutureWarning; no speed change"
    needles = ("cuda.amp", "cpu.amp", "torch.cuda import", "torch.cpu import")
    ast_needles = (tuple(sorted(DEPRECATED_AMP_MODULES)),)
    target = Target.ANY
    fix = Applicability.SAFE
    docs = RuleDocs(
        what="""
        Checks for uses and imports of `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`,
        `torch.cuda.amp.custom_fwd` / `custom_bwd` and `torch.cpu.amp.*`, however they are
        imported or aliased.
        """,
        why="""
        These wrappers emit a `FutureWarning` on every construction since torch 2.4
        (pytorch/pytorch#126527) and are slated for removal; `torch.amp` is the one API for
        every device type. No speed changes: the wrappers are thin subclasses of the
        `torch.amp` objects, with the same defaults (float16 on CUDA, bfloat16 on CPU).
        """,
        example="""
        from torch.cuda.amp import autocast, GradScaler

        scaler = GradScaler()
        with autocast(True, torch.float16):
            loss = model(x)
        """,
        use_instead="""
        from torch.amp import autocast, GradScaler

        scaler = GradScaler("cuda")
        with autocast("cuda", enabled=True, dtype=torch.float16):
            loss = model(x)
        """,
        fix_safety="""
        Safe: behaviour is unchanged. Positional autocast arguments become keywords (the
        old order was `enabled, dtype, cache_enabled`; the new one starts with
        `device_type, dtype`), and an import and all its call sites are rewritten together.
        Replacements need torch 1.10 (`torch.amp.autocast`), 2.3 (`torch.amp.GradScaler`)
        and 2.4 (`torch.amp.custom_fwd/custom_bwd`): with a lower `torch-version` floor those
        rewrites are not offered. Uses other than calls and decorators (passing the class
        around, subclassing it) are reported without a fix. Code kept for an older torch is
        not reported: the fallback of `try: ... except (ImportError, AttributeError,
        TypeError)`, and the branches of a torch version test (`is_torch_version(...)`,
        `_TORCH_GREATER_EQUAL_2_4`, `hasattr(torch, "amp")`, `version.parse(torch.__version__)`).
        """,
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.fixes = DeprecatedAmpFixes(ctx)
        self._handled: set[int] = set()
        self._in_import = 0

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self._in_import -= 1

    def _guarded(self, node: cst.CSTNode) -> bool:
        """Inside code kept for an older torch (try/except ImportError, a version test): deliberate."""
        return version_guarded(self.ctx.analysis(training_facts), node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import += 1
        module = dotted(node.module) if node.module is not None and not node.relative else None
        if module not in DEPRECATED_AMP_MODULES or isinstance(node.names, cst.ImportStar):
            return
        if self._guarded(node):
            return
        for alias in node.names:
            name = dotted(alias.name)
            replacement = DEPRECATED_AMP.get(f"{module}.{name}")
            if replacement is None:
                continue
            self.report(
                alias,
                f"{module}.{name} is deprecated (FutureWarning since torch 2.4): import {name} from torch.amp "
                f"and pass device type \"{replacement.device}\"",
                self.fixes.for_import(node, alias),
            )

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._in_import -= 1

    def _message(self, target: str) -> str:
        replacement = DEPRECATED_AMP[target]
        new = f"torch.amp.{replacement.name}"
        how = {"autocast": f'{new}("{replacement.device}", ...)', "GradScaler": f'{new}("{replacement.device}", ...)'}.get(
            replacement.name, f'{new}(..., device_type="{replacement.device}")')
        return f"{target} is deprecated (FutureWarning since torch 2.4): use {how}"

    def visit_Call(self, node: cst.Call) -> None:
        if self._in_import or not isinstance(node.func, cst.Attribute):
            return
        target = self.ctx.qualname(node.func)
        if target not in DEPRECATED_AMP:
            return
        self._handled.add(id(node.func))
        if self._guarded(node):
            return
        self.report(node, self._message(target), self.fixes.for_call(node, target))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if not isinstance(expr, cst.Attribute):
            return
        target = self.ctx.qualname(expr)
        if target not in DEPRECATED_AMP:
            return
        self._handled.add(id(expr))
        if self._guarded(expr):
            return
        self.report(expr, self._message(target), self.fixes.for_bare_decorator(expr, target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._in_import or id(node) in self._handled:
            return
        target = self.ctx.qualname(node)
        if target in DEPRECATED_AMP and not self._guarded(node):
            self.report(node, self._message(target))


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
