"""GPU401 fp32-matmul-without-tf32: a float32 GPU training script that leaves TF32 matmuls off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from gpulint.analysis.amp_regions import amp_regions
from gpulint.analysis.amp_steps import TRAINING_STEP_NEEDLES, AmpStep
from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Decision, Evidence, Premise
from gpulint.analysis.frameworks import TORCH_CODE, torch_code
from gpulint.analysis.reach import OFF_ENVIRONMENT, RUNS, off_environment, runs
from gpulint.analysis.script_settings import convnet_with_head, torch_import_alias
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.style import detect as detect_style
from gpulint.core.verification import TF32_MATMULS, Verification
from gpulint.project.facts import SETTING_MATMUL_PRECISION
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target
from gpulint.rules.gpu001_missing_autocast import ENOUGH_WORK, WIDE_ENOUGH, fp32_step, step_scale

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

SETTING = "{torch}.set_float32_matmul_precision({quote}high{quote})"

TRAINS_ON_CUDA = Premise(
    "trains-on-cuda",
    "the file runs a training step of its own (backward and an optimizer step; no framework owns the loop) "
    "and shows CUDA evidence, here or in a caller.")
FLOAT32 = Premise(
    "float32",
    "the step's forward pass and loss run in float32: no autocast covers them, the model is not cast to 16 "
    "bits, and no other mixed-precision mechanism is used around it (GPU001's fp32 premise). Undecided when "
    "the file uses autocast in a way gpulint cannot link to the step.")
GPU_BOUND = Premise(
    "gpu-bound",
    "the loop waits on the GPU's matmuls: refuted in reinforcement-learning loops (the file imports an "
    "environment package, anywhere in the file: inside a function or a notebook cell counts too) and with "
    "sparse tensors.")
MATMUL_BOUND = Premise(
    "matmul-bound",
    "matmuls are a real share of the step's work: refuted when every model the file builds is a convnet whose "
    "Linear layers are only a head (a torchvision ResNet/VGG/DenseNet..., a project class whose other classes "
    "are convolution blocks, models taken from such a module by `module.__dict__[arch]`) or a Linear-only "
    "head beside one (a linear probe): convolutions already run in TF32 by default (`cudnn.allow_tf32`), so "
    "the setting reaches only the head. Shown otherwise, also when the models cannot be read.")
DEFAULT_PRECISION = Premise(
    "default-matmul-precision",
    "nothing sets or reads the float32 matmul precision (`torch.set_float32_matmul_precision`, "
    "`torch.backends.cuda.matmul.allow_tf32`, the `fp32_precision` settings of torch 2.9) in the file, its "
    "callers, or any module they import: torch's default since 1.12, \"highest\", keeps TF32 off for "
    "matmuls. Undecided when the project supports an older torch, whose default was TF32 on; refuted when its "
    "code runs only on such a torch (it, or a module it imports, unconditionally imports a module gone by 1.12: "
    "`torchtext.legacy`, gone with torch 1.11, or torchtext's `Field`/`BucketIterator`, gone with 1.8; or a "
    "file of the project builds its extension with `torch.utils.ffi`, gone in 1.0; or it asserts an older major "
    "version at module level, `assert torch.__version__.split('.')[0] == '0'`; or it, or a module it imports, "
    "reads a loss it calls `.backward()` on as `loss.data[0]`, an IndexError from 1.0 on; or it is a helper "
    "module that only defines, outside any package others install (no `__init__.py` beside it, or no setup.py, "
    "setup.cfg or pyproject.toml that builds a distribution at or above its folder), and each project file "
    "that imports it is such code).")


class Fp32MatmulWithoutTf32(Rule):
    code = "GPU401"
    name = "fp32-matmul-without-tf32"
    summary = "float32 GPU training without TF32 matmuls (no autocast, no matmul precision setting)"
    impact = "10240x10240 float32 matmul on an A100: 0.11 s -> 0.016 s with TF32 (~7x; CUDA semantics notes)"
    needles = ("backward",)
    ast_needles = TRAINING_STEP_NEEDLES
    target = Target.GPU
    in_tests = False
    fix = Applicability.UNSAFE
    preview = True
    verification = Verification(TF32_MATMULS, ("optimizer",),
                                "the training steps run with the matmul precision the fix set")
    docs = RuleDocs(
        what="""
        Checks for GPU training scripts that run their own training loop in float32 (no
        autocast, no 16-bit model) and never choose a float32 matmul precision. The file,
        the files that import it and every module they import are searched for
        `torch.set_float32_matmul_precision`, `torch.backends.cuda.matmul.allow_tf32` and
        the `fp32_precision` settings; any mention, whichever value, silences the rule.
        Reported once per file, on the first optimizer step of its first such training
        step. Silent where tensor cores cannot matter, judged as for GPU001: every layer of
        the trained model narrower than `min-width`, or too few rows per step, and in
        reinforcement-learning loops and with sparse tensors, and for convnets whose only
        Linear layers are a classifier or projection head.
        """,
        why="""
        Since torch 1.12, float32 matmuls default to full float32 precision
        (`torch.get_float32_matmul_precision() == "highest"`, verified on 2.14.1), so Ampere
        and newer GPUs leave their TF32 tensor cores idle for them. PyTorch's CUDA semantics
        notes measure a 10240x10240 matmul on an A100 at 0.11 s in float32 and 0.016 s with
        TF32 (about 7x). Convolutions already use TF32 (`cudnn.allow_tf32` defaults to True),
        so the gain is in linear layers, attention and other matmuls.
        """,
        example="""
        import torch

        model = torch.nn.Linear(1024, 1024).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch

        torch.set_float32_matmul_precision("high")

        model = torch.nn.Linear(1024, 1024).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        Unsafe: TF32 keeps float32's range but rounds matmul inputs to a 10-bit mantissa, so
        results change in the fourth significant digit; most training is indifferent to it
        (it is the precision autocast's float16 matmuls have), code that compares against
        float32 references or solves ill-conditioned systems is not. The fix writes
        `torch.set_float32_matmul_precision("high")` after the top-level imports that hold
        `import torch` (torch 1.12 or newer; the setting is process-wide, and it runs when
        the module is imported). No fix when `torch` is not imported at the top level by
        `import torch`. A GPU older than Ampere ignores the setting. Not reported under
        autocast (its matmuls already run in 16 bits), where a framework owns the loop, in
        CPU-only files, in test files, or in a file that imports another deep-learning framework
        (PaddlePaddle, OneFlow, ...) and torch nowhere.
        """,
        premises=(TORCH_CODE, TRAINS_ON_CUDA, FLOAT32, WIDE_ENOUGH, ENOUGH_WORK, GPU_BOUND, OFF_ENVIRONMENT,
                  MATMUL_BOUND, DEFAULT_PRECISION, RUNS),
        fix_cases=(
            FixCase('`torch.set_float32_matmul_precision("high")` after the imports that hold `import torch`',
                    Applicability.UNSAFE, "fp32_cuda_training.py"),
            FixCase("`torch` not imported at the top level by `import torch`",
                    None, "torch_imported_in_try_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        facts = ctx.analysis(amp_regions)
        if facts.framework_owned or not facts.steps:
            return  # no training step of the file's own (a framework owns the loop)
        project = ctx.project
        common = {
            TORCH_CODE: torch_code(project),
            TRAINS_ON_CUDA: cuda_evidence(project),
            GPU_BOUND: REFUTED if project.rl or project.own.sparse else SHOWN,
            MATMUL_BOUND: REFUTED if convnet_with_head(ctx) is SHOWN else SHOWN,
            DEFAULT_PRECISION: self._default_precision(ctx),
        }
        for step in sorted(facts.steps, key=lambda s: ctx.order(s.node) or 0):
            fp32 = fp32_step(ctx, facts, step)
            if fp32 is None:
                continue
            wide, work = step_scale(ctx, step)
            decision = self.decide({**common, FLOAT32: fp32, WIDE_ENOUGH: wide, ENOUGH_WORK: work,
                                    OFF_ENVIRONMENT: off_environment(ctx, step.backwards[0].call),
                                    RUNS: runs(ctx, step.node)})
            if decision.report:
                self._report(ctx, step, decision)
                return  # once per file: the setting is process-wide

    def _default_precision(self, ctx: AstContext) -> Evidence:
        """TF32 is off unless the code says otherwise, on every torch the project supports: before 1.12,
        `allow_tf32` defaulted to True, so with an older floor the claim does not hold for every user, and
        for code that runs only on an older torch (its torch ceiling) it holds for none."""
        if SETTING_MATMUL_PRECISION in ctx.project.settings:
            return REFUTED
        ceiling = ctx.project.torch_ceiling
        if ceiling is not None and ceiling <= floors.since(floors.MATMUL_PRECISION):
            return REFUTED
        floor = ctx.settings.torch_version
        return UNDECIDED if floor is not None and floor < floors.since(floors.MATMUL_PRECISION) else SHOWN

    def _report(self, ctx: AstContext, step: AmpStep, decision: Decision) -> None:
        fix: Optional[Applicability] = None
        fix_message, note = "", ""
        quote = ctx.analysis(_quote)
        torch = torch_import_alias(ctx.tree)
        too_new = floors.too_new(ctx.settings.torch_version, [floors.MATMUL_PRECISION])
        if too_new is not None:
            note = f"no fix: {too_new.reason()}"
        elif torch is None:
            note = "no fix: the file does not `import torch` at the top level"
        else:
            fix = Applicability.UNSAFE
            fix_message = f"Add `{SETTING.format(torch=torch, quote=quote)}` after the imports"
        anchor = min((s.call for s in step.steps), key=lambda call: ctx.order(call) or 0)
        ctx.report(self, anchor, "float32 training without TF32 matmuls: no autocast and no matmul precision "
                                 "setting (up to ~7x slower matmuls on Ampere+)",
                   fix=fix, fix_message=fix_message, data={"quote": quote}, statement=ctx.statement(anchor),
                   note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        from gpulint.core.pending import PendingFix
        from gpulint.rewrites.after_imports import after_torch_imports

        assert detection.data is not None
        placed = after_torch_imports(fctx, SETTING.replace("{quote}", detection.data["quote"]))
        if placed is None:
            return None
        return PendingFix.unsafe(detection.fix_message, placed[1])


def _quote(ctx: AstContext) -> str:
    """The quote character the file's strings use (the one a LibCST fix context reads: core/style.py)."""
    return detect_style(ctx.text, ctx.settings.line_length, "    ").quote
