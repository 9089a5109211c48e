"""GPU404 convnet-without-channels-last: a 2-D convnet trained under autocast in the NCHW layout."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Optional, Union

from gpulint.analysis.amp import Coverage
from gpulint.analysis.amp_dtypes import BFLOAT16_DTYPE, FLOAT16_DTYPE, MAYBE_FLOAT16, autocast_dtype
from gpulint.analysis.amp_regions import AmpRegions, amp_regions
from gpulint.analysis.amp_steps import TRAINING_STEP_NEEDLES
from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.script_settings import convolutions
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DATA_PARALLEL_WRAPPERS
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.facts import SETTING_CHANNELS_LAST
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

TRAINS_ON_CUDA = Premise(
    "trains-on-cuda",
    "the file runs a training step of its own (backward and an optimizer step; no framework owns the loop) "
    "and shows CUDA evidence, here or in a caller.")
DENSE_CONV2D = Premise(
    "dense-2d-convolutions",
    "the file builds 2-D convolutions without `groups=` (`nn.Conv2d`, `nn.ConvTranspose2d`) or a torchvision "
    "convnet made of them (ResNet, VGG, DenseNet, Inception...). Grouped or depthwise convolutions, which "
    "channels_last can slow down, and models built in other files are undecided.")
UNDER_AUTOCAST = Premise(
    "16-bit-autocast",
    "every training step of the file computes its loss under autocast in float16 or bfloat16, where tensor "
    "cores run the convolutions.")
NCHW = Premise(
    "nchw",
    "nothing mentions `torch.channels_last` in the file, its callers, or the modules they import.")


class ConvnetWithoutChannelsLast(Rule):
    code = "GPU404"
    name = "convnet-without-channels-last"
    summary = "2-D convnet trained under autocast in the NCHW layout (no channels_last)"
    impact = ("22% faster ResNet-50 training, 8-35% across models on a V100 (memory-format tutorial, as quoted "
              "by fast.ai); ~30% on V100/A100 (MosaicML)")
    needles = ("autocast",)
    ast_needles = (*TRAINING_STEP_NEEDLES, ("torch.autocast", "torch.amp", "torch.cuda.amp", "torch.cpu.amp"))
    target = Target.GPU
    in_tests = False
    preview = True
    fix = Applicability.UNSAFE
    verification = Verification(NEUTRAL, ("optimizer",),
                                "the model's parameters are in channels_last (no speed effect on a CPU run)")
    docs = RuleDocs(
        what="""
        Checks for GPU training scripts whose own loop trains a 2-D convnet (dense
        `nn.Conv2d` layers or a torchvision ResNet/VGG/DenseNet...) under float16 or bfloat16
        autocast, and never mention `torch.channels_last` (in the file, its callers or the
        modules they import). Reported once per file, on its first optimizer step.
        """,
        why="""
        Tensor-core convolution kernels work in NHWC order; with NCHW tensors cuDNN
        transposes activations around every convolution. The PyTorch memory-format tutorial
        reports 22 % faster ResNet-50 training with AMP on a V100 (8-35 % across models, as
        quoted by the fast.ai docs); MosaicML's method card reports about 30 % for ResNet-50
        on V100 and A100.
        """,
        example="""
        import torch
        import torchvision

        model = torchvision.models.resnet50().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch
        import torchvision

        model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            x = x.cuda().to(memory_format=torch.channels_last)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        Unsafe: the fix writes `model.to(memory_format=torch.channels_last)` just before the
        optimizer is built from `model.parameters()`. `Module.to` converts the parameters in
        place, so the optimizer and every other reference see the converted weights; a 2-D
        convolution whose weight is channels_last runs in channels_last even when its input
        is not (cuDNN suggests channels_last when either is), so the activations follow
        from the first convolution on, and the input batch needs no edit (converting it too,
        `x.to(device, memory_format=torch.channels_last, non_blocking=True)`, saves the one
        transpose at the first layer). Numerics change in the last bits (other kernels), and
        some operations are slower or fail in channels_last: grouped and depthwise
        convolutions (not reported), custom CUDA kernels and `.view()` on activations (use
        `.reshape()`): measure. Offered only when the optimizer's parameters come from one
        plain name in a statement of its own, and never when the model is wrapped for data
        parallelism (DDP's gradient buckets are laid out at wrapping). Not reported for
        float32 steps, grouped or depthwise convolutions, models built in other files, where a
        framework owns the loop, in CPU-only files or tests.
        """,
        premises=(TRAINS_ON_CUDA, DENSE_CONV2D, UNDER_AUTOCAST, NCHW),
        fix_cases=(
            FixCase("`model.to(memory_format=torch.channels_last)` before the optimizer is built from "
                    "`model.parameters()` (preview; the convolutions' outputs follow the weights' layout)",
                    Applicability.UNSAFE, "own_convnet_fp16_scaled.py"),
            FixCase("the model is wrapped in DDP, DataParallel or FSDP; the optimizer steps several models' "
                    "parameters",
                    None, "ddp_wrapped_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        facts = ctx.analysis(amp_regions)
        if facts.framework_owned or not facts.steps:
            return  # no training step of the file's own (a framework owns the loop)
        decision = self.decide({
            TRAINS_ON_CUDA: cuda_evidence(ctx.project),
            DENSE_CONV2D: UNDECIDED if _GROUPS.search(ctx.text) else convolutions(ctx, only_dense_2d=True),
            UNDER_AUTOCAST: _under_autocast(ctx, facts),
            NCHW: REFUTED if SETTING_CHANNELS_LAST in ctx.project.settings else SHOWN,
        })
        if not decision.report:
            return
        anchor = _script_anchor(ctx, facts)
        message = "convnet trained under autocast in the NCHW layout: tensor-core convolutions want torch.channels_last"
        placed = _conversion_point(ctx, facts)
        fix: Optional[Applicability] = None
        fix_message, note, data = "", "", None
        if isinstance(placed, str):
            note = f"no fix: {placed}"
        else:
            name, optimizer = placed
            fix, fix_message = Applicability.UNSAFE, f"Convert `{name}` to channels_last before its optimizer is built"
            data = {"model": name, "optimizer": optimizer}
        ctx.report(self, anchor, message, fix=fix, fix_message=fix_message, data=data,
                   statement=ctx.statement(anchor), note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import InsertStatements, PendingFix
        from gpulint.core.walk import descendants

        assert detection.data is not None
        name, optimizer = detection.data["model"], detection.data["optimizer"]
        built = [line for line in descendants(fctx.module) if isinstance(line, cst.SimpleStatementLine)
                 and len(line.body) == 1 and isinstance(line.body[0], cst.Assign) and len(line.body[0].targets) == 1
                 and isinstance(line.body[0].targets[0].target, cst.Name)
                 and line.body[0].targets[0].target.value == optimizer]
        if len(built) != 1:
            return None
        torch = fctx.imports.module_alias("torch")
        return PendingFix.unsafe(detection.fix_message, torch.edit,
                                 InsertStatements(built[0], f"{name}.to(memory_format={torch.expr}.channels_last)"))


def _script_anchor(ctx: AstContext, facts: AmpRegions) -> ast.Call:
    """The first optimizer step of the file in source order (script_settings.py's script_anchor, on these steps)."""
    calls = [s.call for step in facts.steps for s in step.steps] or [b.call for step in facts.steps
                                                                     for b in step.backwards]
    return min(calls, key=lambda call: ctx.order(call) or 0)


def _under_autocast(ctx: AstContext, facts: AmpRegions) -> Evidence:
    for step in facts.steps:
        for backward in step.backwards:
            cover = facts.coverage(facts.loss_statement(step, backward))
            if cover.coverage is not Coverage.COVERED or not cover.calls:
                return UNDECIDED if cover.coverage is Coverage.UNKNOWN else REFUTED
            if any(autocast_dtype(ctx, c) not in (FLOAT16_DTYPE, BFLOAT16_DTYPE, MAYBE_FLOAT16) for c in cover.calls):
                return UNDECIDED
    return SHOWN


_GROUPS = re.compile(r"\bgroups\s*=")  # a grouped convolution somewhere, maybe in a helper the file calls


def _conversion_point(ctx: AstContext, facts: AmpRegions) -> Union[tuple[str, str], str]:
    """The model's name and the optimizer's, whose one building statement the fix converts the model just
    before, or why no fix is offered."""
    if any(wrapper in ctx.text for wrapper in DATA_PARALLEL_WRAPPERS):
        return "the model is wrapped for data parallelism; convert it before it is wrapped"
    stepped = [s.optimizer for step in facts.steps for s in step.steps]
    optimizers = {o.id for o in stepped if isinstance(o, ast.Name)}
    if len(optimizers) != 1 or any(not isinstance(o, ast.Name) for o in stepped):
        return "the steps do not step one optimizer held in a plain name"
    optimizer = optimizers.pop()
    built = [n for n in ctx.nodes(ast.Assign) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == optimizer and _own_line(ctx, n)]
    if len(built) != 1:
        return f"`{optimizer}` is not built by one statement of its own"
    value = built[0].value
    first = value.args[0] if isinstance(value, ast.Call) and value.args \
        and not isinstance(value.args[0], ast.Starred) else None
    if not (isinstance(first, ast.Call) and not first.args and not first.keywords
            and isinstance(first.func, ast.Attribute) and first.func.attr == "parameters"
            and isinstance(first.func.value, ast.Name)):
        return f"`{optimizer}` is not built from one model's `parameters()`"
    return first.func.value.id, optimizer


_TAIL = re.compile(r"\s*;?\s*(?:#.*)?$")


def _own_line(ctx: AstContext, statement: ast.stmt) -> bool:
    """The statement is a line of its own (LibCST's one-statement SimpleStatementLine): nothing but
    indentation before it, nothing but a `;` or a comment after it."""
    start = ctx.offset(statement.lineno, statement.col_offset)
    if ctx.text[ctx.offset(statement.lineno, 0):start].strip():
        return False
    end = ctx.offset(statement.end_lineno or statement.lineno, statement.end_col_offset or 0)
    ends = [i for i in (ctx.text.find("\n", end), ctx.text.find("\r", end)) if i >= 0]  # a lone CR ends lines too
    return _TAIL.match(ctx.text[end:min(ends) if ends else len(ctx.text)]) is not None
