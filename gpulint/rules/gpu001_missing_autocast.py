"""GPU001 missing-autocast: a training step computes its forward pass and loss in fp32."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.training import (
    TRAINING_STEP_NEEDLES,
    Backward,
    Coverage,
    TrainingFacts,
    TrainingStep,
    training_facts,
    training_step_of,
)
from gpulint.analysis.widths import trained_model_width
from gpulint.core.edits import Applicability
from gpulint.core.options import Choice, Integer, Option, version_text
from gpulint.core.pending import PendingFix
from gpulint.core.settings import Settings
from gpulint.core.verification import MIXED_PRECISION, Verification, construct_enabled
from gpulint.project.view import ProjectView
from gpulint.rewrites.mixed_precision import (
    GRAD_SCALER_SINCE,
    Region,
    ScalerHome,
    ScalerPlan,
    StepRewrite,
    autocast_region,
    device_type_code,
    grad_scaler_class,
    loss_passed_in,
    loss_statement,
    refused_ops,
    scaler_anchor,
    scaler_home,
    scaler_name,
    scaler_plan,
    step_edits,
)
from gpulint.rules.base import Rule, RuleDocs, Target

AUTOCAST_SINCE = (1, 10)
_SIXTEEN_BIT = re.compile(r"\b(?:bfloat16|float16|half)\b")
MIN_WIDTH: Option[int] = Option(
    "min-width", Integer(1), 128,
    "GPU001 stays silent when every layer width of the trained model is known and below this "
    "(launch-bound models gain nothing from tensor cores; a roofline model, not a GPU measurement: bench/amp_width.py)")

ON_GPU = Premise(
    "on-gpu",
    "the step runs on a CUDA GPU (CUDA evidence in the file or a caller: a \"cuda\" string, torch.cuda, "
    "`.cuda()`, an integer device such as `.to(local_rank)` or `device = 0`), or on an XPU whose device the "
    "fix can name (`device.type`). Refuted on a TPU, MPS or the CPU alone, and on an XPU whose device the "
    "fix would have to hard-code as CUDA.")
FP32 = Premise(
    "fp32",
    "the forward pass and the loss run in fp32: no autocast covers them (here, in a decorator or in the "
    "model's own `forward`), the weights are not 16-bit (`.half()`, `.to(torch.bfloat16)`, "
    "`torch_dtype=torch.bfloat16`), and no other mechanism (FSDP MixedPrecision, apex, DeepSpeed, layers "
    "casting weights) is used around it. A GradScaler alone is not mixed precision: a step that scales its "
    "loss but never enters autocast trains in fp32. Undecided when autocast is used in a way gpulint cannot "
    "link to the step.")
WIDE_ENOUGH = Premise(
    "wide-enough",
    "the model is wide enough for tensor cores to matter: refuted when every layer width of the model the "
    "optimizer updates is known (literals, argparse and dataclass defaults, values the project passes) and "
    "the widest is below `min-width`. An unknown width is not a small one.")
ENOUGH_WORK = Premise(
    "enough-work",
    "a step multiplies enough rows for its width: refuted when the rows it feeds are known from a standard "
    "benchmark dataset (Cora trained full-batch: 2,708 rows; PROTEINS in batches of 32: 32 x 39 nodes) and "
    "rows x width^2 of the widest known layer stays below 8e8, where the best speed-up of bench/amp_width.py's "
    "roofline model (a modelled estimate, not a GPU measurement) stays under 1.5x (3,400 rows at 512 wide). "
    "Unknown rows or width are not small ones.")
AUTOCAST_EXISTS = Premise(
    "autocast-exists",
    "every torch the project supports has `torch.autocast` (1.10): refuted when the floor it declares is older.")
GPU_BOUND = Premise(
    "gpu-bound",
    "the loop waits on the GPU: refuted in reinforcement-learning loops (the file imports an environment "
    "package), with sparse tensors (autocast does not cover sparse kernels), and where a framework "
    "(Lightning, Accelerate, Fabric, DeepSpeed) owns precision.")
# rows x width^2 of a step below which mixed precision cannot pay off: bench/amp_width.py's roofline model
# (host dispatch measured on a CPU, A100 datasheet throughput) reaches 1.5x at 8.3e8-9.2e8; rounded down
STEP_WORK_FLOOR = 800_000_000
AMP_DTYPE: Option[str] = Option(
    "amp-dtype", Choice(("float16", "bfloat16")), "float16",
    "the dtype autocast fixes use: float16 (every CUDA GPU, with a GradScaler) or bfloat16 (Ampere and newer)")


class MissingAutocast(Rule):
    code = "GPU001"
    name = "missing-autocast"
    summary = "Training step runs its forward pass and loss in fp32 (no autocast)"
    impact = "up to 3x step speed on Volta and newer (PyTorch Tuning Guide); 2-3x (AMP recipe)"
    needles = ("backward",)
    ast_needles = TRAINING_STEP_NEEDLES
    target = Target.GPU
    in_tests = False
    fix = Applicability.UNSAFE
    options = (AMP_DTYPE, MIN_WIDTH)
    verification = Verification(MIXED_PRECISION, ("autocast", "grad_scaler"),
                                "the autocast region the rewrite added is entered", construct_enabled,
                                mixed_precision=True)
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
        for backward are mostly stored in 16 bits, which also lowers memory use. Measured on
        CPU, fp16 + GradScaler and bf16 training of small MLPs and CNNs tracked fp32 within
        0.7 % per step over 50 steps. Small networks gain nothing: the AMP recipe
        warns that a network which fails to saturate the GPU is CPU-bound and AMP's effect
        "won't matter". `min-width` (128) comes from a roofline model, not a GPU
        measurement (bench/amp_width.py: host cost per op measured on a CPU, A100 datasheet
        throughput): below 128 wide it puts AMP's best case under 1x up to 64K rows a step.
        """,
        example="""
        device = torch.device("cuda")
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
        device = torch.device("cuda")
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
        premises=(ON_GPU, FP32, WIDE_ENOUGH, ENOUGH_WORK, AUTOCAST_EXISTS, GPU_BOUND),
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = training_step_of(self.ctx, node)
        if found is None:
            return
        facts, step, backward = found
        if step.backwards[0] is not backward:
            return  # one finding per training step, at its first backward()
        project = self.ctx.project
        fp32 = REFUTED if facts.low_precision_model or _sixteen_bit_elsewhere(project) else SHOWN
        for each in step.backwards:
            statement = loss_statement(facts, step, each)
            if statement is None:
                return
            if loss_passed_in(facts, each):
                return  # a helper handed the loss (a loss scaler's __call__): the forward pass is the caller's
            coverage = facts.coverage(statement).coverage
            if coverage is Coverage.COVERED:
                fp32 = REFUTED
            elif coverage is Coverage.UNKNOWN and fp32 is SHOWN:
                fp32 = UNDECIDED
        if fp32 is SHOWN and "grad-scaler" in project.mixed_precision and _SIXTEEN_BIT.search(self.ctx.text):
            fp32 = UNDECIDED  # a scaler and a 16-bit dtype named here: the model may compute in it (nanochat)
        bound = REFUTED if project.rl or project.own.sparse else SHOWN
        floor = self.ctx.settings.torch_version
        autocast_exists = REFUTED if floor is not None and floor < AUTOCAST_SINCE else SHOWN
        width = trained_model_width(facts, step)
        wide = REFUTED if width is not None and width < self.ctx.settings.value(MIN_WIDTH) else SHOWN
        rows = project.own.step_rows
        work = REFUTED if width is not None and rows is not None and rows * width * width < STEP_WORK_FLOOR else SHOWN
        decision = self.decide({ON_GPU: self._on_gpu(facts, step), FP32: fp32, WIDE_ENOUGH: wide, ENOUGH_WORK: work,
                                AUTOCAST_EXISTS: autocast_exists, GPU_BOUND: bound})
        if not decision.report:
            return
        fix, note = self._fix(facts, step, backward)
        self.report_decided(
            decision,
            node,
            "training step computes its forward pass and loss in fp32: wrap them in torch.autocast "
            f"(mixed precision is up to 3x faster on tensor-core GPUs){note}",
            fix,
        )

    @classmethod
    def may_report(cls, project: ProjectView, settings: Optional[Settings] = None) -> bool:
        return super().may_report(project, settings) and not _precision_handled(project)

    def _on_gpu(self, facts: TrainingFacts, step: TrainingStep) -> Evidence:
        """CUDA evidence; on an XPU, only when the fix can use the script's own device type."""
        found = cuda_evidence(self.ctx.project)
        if found is not REFUTED or "xpu" not in self.ctx.project.devices or self.ctx.project.gpu:
            return found
        anchor = scaler_anchor(facts, step.node)
        return SHOWN if device_type_code(facts, step, anchor) != '"cuda"' else REFUTED

    def _fix(self, facts: TrainingFacts, step: TrainingStep, backward: Backward) -> tuple[Optional[PendingFix], str]:
        """The rewrite, or None and the reason (appended to the message) when no rewrite is right."""
        settings = self.ctx.settings
        dtype = settings.value(AMP_DTYPE)
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
                return None, ("; no float16 fix: torch.amp.GradScaler needs torch 2.3 "
                              f"(torch-version is {version_text(floor)})")
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
        scaler_class, class_edit = grad_scaler_class(self.ctx, torch.expr, parallel)
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


def _sixteen_bit_elsewhere(project: ProjectView) -> bool:
    """16-bit compute done another way in or around the file: autocast in a caller or in the model's own
    module, FSDP MixedPrecision(Policy), a model cast or loaded in 16 bits, layers that compute in their
    input's dtype, apex, DeepSpeed. A GradScaler alone is not 16-bit compute."""
    return bool(set(project.mixed_precision) - {"grad-scaler"})


def _precision_handled(project: ProjectView) -> bool:
    """Refuted before parsing: 16-bit training done another way, or a loop bound by its environment."""
    if project.rl:
        return True  # the step waits on a simulator; small policy nets gain nothing (AMP recipe)
    if project.own.sparse:
        return True  # sparse kernels are outside autocast: mixing them with 16-bit activations fails
    return _sixteen_bit_elsewhere(project)


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
