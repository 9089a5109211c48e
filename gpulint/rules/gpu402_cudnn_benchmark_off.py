"""GPU402 cudnn-benchmark-off: a convnet trained on fixed-size inputs without cuDNN's autotuner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.script_settings import (
    convolutions,
    fixed_input_sizes,
    own_steps,
    script_anchor,
    torch_import_alias,
    trains_on_cuda,
)
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.facts import SETTING_CUDNN_BENCHMARK, SETTING_DETERMINISTIC
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

SETTING = "{torch}.backends.cudnn.benchmark = True"

TRAINS_ON_CUDA = Premise(
    "trains-on-cuda",
    "the file runs a training step of its own (backward and an optimizer step; no framework owns the loop) "
    "and shows CUDA evidence, here or in a caller.")
CONVOLVES = Premise(
    "convolutions",
    "the file builds convolution layers (`nn.Conv1d/2d/3d`, `nn.ConvTranspose*d`), a torchvision convnet, or "
    "a project class whose layers include one.")
FIXED_SIZES = Premise(
    "fixed-input-sizes",
    "the inputs have one size: a fixed-size torchvision dataset (MNIST, CIFAR, SVHN, STL10) or transforms "
    "that crop or resize to one size, and nothing that varies it (image folders or detection datasets "
    "without such a crop, `Resize(n)` keeping the aspect ratio, padding collators, multi-scale training, "
    "`F.interpolate`). A custom `collate_fn`, or data built in another file, is undecided.")
AUTOTUNER_UNSET = Premise(
    "autotuner-unset",
    "nothing sets or reads `torch.backends.cudnn.benchmark`, `cudnn.deterministic` or "
    "`torch.use_deterministic_algorithms` in the file, its callers, or any module they import.")


class CudnnBenchmarkOff(Rule):
    code = "GPU402"
    name = "cudnn-benchmark-off"
    summary = "convnet trained on fixed-size inputs with cuDNN's autotuner off (cudnn.benchmark)"
    impact = "cuDNN's heuristic instead of the fastest measured algorithm per conv shape (Tuning Guide)"
    needles = ("backward",)
    # a backward and a step (the convolutions may be in a project class built here)
    ast_needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    target = Target.GPU
    in_tests = False
    fix = Applicability.UNSAFE
    preview = True
    verification = Verification(NEUTRAL, ("optimizer",),
                                "the training steps run with cuDNN's autotuner on (no effect on a CPU run)")
    docs = RuleDocs(
        what="""
        Checks for GPU training scripts that run their own loop over a convolutional model
        fed inputs of one size (fixed-size datasets such as CIFAR, or transforms that crop to
        one size) and never set `torch.backends.cudnn.benchmark`. Any mention of
        `cudnn.benchmark`, `cudnn.deterministic` or `torch.use_deterministic_algorithms` in
        the file, its callers or the modules they import silences the rule: the code has
        chosen. Reported once per file, on its first optimizer step.
        """,
        why="""
        With `cudnn.benchmark = False` (the default, verified on 2.14.1) cuDNN picks each
        convolution's algorithm by heuristic. With it on, the first call of each input shape
        times the available algorithms and caches the fastest; with fixed input sizes that
        cost is paid once and every later step runs the fastest kernel. The PyTorch
        Performance Tuning Guide lists it among the first settings for convnets; the gain
        depends on the model and GPU (no figure is measured here).
        """,
        example="""
        import torch
        import torchvision

        model = torchvision.models.resnet18(num_classes=10).cuda()
        data = torchvision.datasets.CIFAR10("data", download=True, transform=to_tensor)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in torch.utils.data.DataLoader(data, batch_size=128, drop_last=True):
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch
        import torchvision

        torch.backends.cudnn.benchmark = True

        model = torchvision.models.resnet18(num_classes=10).cuda()
        data = torchvision.datasets.CIFAR10("data", download=True, transform=to_tensor)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in torch.utils.data.DataLoader(data, batch_size=128, drop_last=True):
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        Unsafe: the autotuner may choose non-deterministic algorithms, so runs stop being
        bit-for-bit reproducible, and every new input shape (a smaller last batch, an
        evaluation resolution) pays one round of timing; with sizes that keep changing it is
        slower than the heuristic. The fix writes `torch.backends.cudnn.benchmark = True`
        after the top-level imports that hold `import torch` (it runs when the module is
        imported). No fix when `torch` is not imported at the top level by `import torch`.
        Not reported when the input sizes may vary or cannot be told, where a framework
        owns the loop, in CPU-only files or in test files.
        """,
        premises=(TRAINS_ON_CUDA, CONVOLVES, FIXED_SIZES, AUTOTUNER_UNSET),
        fix_cases=(
            FixCase("`torch.backends.cudnn.benchmark = True` after the imports that hold `import torch`",
                    Applicability.UNSAFE, "cifar_resnet.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        steps = own_steps(ctx)
        if steps is None:
            return
        settings = ctx.project.settings
        decision = self.decide({
            TRAINS_ON_CUDA: trains_on_cuda(ctx, steps),
            CONVOLVES: convolutions(ctx),
            FIXED_SIZES: fixed_input_sizes(ctx),
            AUTOTUNER_UNSET: REFUTED if settings & {SETTING_CUDNN_BENCHMARK, SETTING_DETERMINISTIC} else SHOWN,
        })
        if not decision.report:
            return
        fix: Optional[Applicability] = None
        fix_message, note = "", ""
        torch = torch_import_alias(ctx.tree)
        too_new = floors.too_new(ctx.settings.torch_version, [floors.CUDNN_BENCHMARK])
        if too_new is not None:
            note = f"no fix: {too_new.reason()}"
        elif torch is None:
            note = "no fix: the file does not `import torch` at the top level"
        else:
            fix, fix_message = Applicability.UNSAFE, f"Add `{SETTING.format(torch=torch)}` after the imports"
        anchor = script_anchor(steps)
        ctx.report(self, anchor, "convnet trained on fixed-size inputs with cudnn.benchmark off: cuDNN guesses "
                                 "instead of timing the fastest algorithm", fix=fix, fix_message=fix_message,
                   statement=ctx.statement(anchor), note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        from gpulint.core.pending import PendingFix
        from gpulint.rewrites.after_imports import after_torch_imports

        placed = after_torch_imports(fctx, SETTING)
        if placed is None:
            return None
        return PendingFix.unsafe(detection.fix_message, placed[1])
