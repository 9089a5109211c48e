"""GPU404 convnet-without-channels-last: a 2-D convnet trained under autocast in the default NCHW layout."""

from __future__ import annotations

import re
from typing import Union

import libcst as cst

from gpulint.analysis.autocast_dtype import BFLOAT16_DTYPE, FLOAT16_DTYPE, MAYBE_FLOAT16, autocast_dtype
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.gpu_scripts import convolutions, own_training_loop, script_anchor, trains_on_cuda
from gpulint.analysis.training import TRAINING_STEP_NEEDLES, Coverage, TrainingFacts
from gpulint.core.edits import Applicability
from gpulint.core.pending import InsertStatements, PendingFix
from gpulint.core.torch_api import DATA_PARALLEL_WRAPPERS
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.core.walk import descendants
from gpulint.project.facts import SETTING_CHANNELS_LAST
from gpulint.rewrites.amp_plan import loss_statement
from gpulint.rules.base import Rule, RuleDocs, Target

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
    )

    def visit_Module(self, node: cst.Module) -> None:
        facts = own_training_loop(self.ctx)
        if facts is None:
            return
        decision = self.decide({
            TRAINS_ON_CUDA: trains_on_cuda(self.ctx, facts),
            DENSE_CONV2D: UNDECIDED if _GROUPS.search(self.ctx.text)
            else convolutions(self.ctx, facts, only_dense_2d=True),
            UNDER_AUTOCAST: self._under_autocast(facts),
            NCHW: REFUTED if SETTING_CHANNELS_LAST in self.ctx.project.settings else SHOWN,
        })
        anchor = script_anchor(facts)
        message = "convnet trained under autocast in the NCHW layout: tensor-core convolutions want torch.channels_last"
        placed = _conversion_point(self.ctx.module, self.ctx.text, facts)
        fix, note = None, ""
        if isinstance(placed, str):
            note = f"no fix: {placed}"
        else:
            name, statement = placed
            torch = self.ctx.imports.module_alias("torch")
            fix = PendingFix.unsafe(f"Convert `{name}` to channels_last before its optimizer is built", torch.edit,
                                    InsertStatements(statement, f"{name}.to(memory_format={torch.expr}.channels_last)"))
        self.report_decided(decision, anchor, message, fix=fix, statement=facts.statement_of(anchor), note=note)

    def _under_autocast(self, facts: TrainingFacts) -> Evidence:
        for step in facts.steps:
            for backward in step.backwards:
                statement = loss_statement(facts, step, backward)
                cover = facts.coverage(statement) if statement is not None else None
                if cover is None or cover.coverage is not Coverage.COVERED or not cover.calls:
                    return UNDECIDED if cover is None or cover.coverage is Coverage.UNKNOWN else REFUTED
                if any(autocast_dtype(self.ctx, c) not in (FLOAT16_DTYPE, BFLOAT16_DTYPE, MAYBE_FLOAT16)
                       for c in cover.calls):
                    return UNDECIDED
        return SHOWN


_GROUPS = re.compile(r"\bgroups\s*=")  # a grouped convolution somewhere, maybe in a helper the file calls


def _conversion_point(module: cst.Module, text: str,
                      facts: TrainingFacts) -> Union[tuple[str, cst.SimpleStatementLine], str]:
    """The model's name and the statement that builds its optimizer (the fix converts the model just before
    it), or why no fix is offered."""
    if any(wrapper in text for wrapper in DATA_PARALLEL_WRAPPERS):
        return "the model is wrapped for data parallelism; convert it before it is wrapped"
    optimizers = {s.optimizer.value for step in facts.steps for s in step.steps if isinstance(s.optimizer, cst.Name)}
    if len(optimizers) != 1 or any(not isinstance(s.optimizer, cst.Name) for step in facts.steps for s in step.steps):
        return "the steps do not step one optimizer held in a plain name"
    optimizer = optimizers.pop()
    built = [line for line in descendants(module) if isinstance(line, cst.SimpleStatementLine)
             and len(line.body) == 1 and isinstance(line.body[0], cst.Assign) and len(line.body[0].targets) == 1
             and isinstance(line.body[0].targets[0].target, cst.Name)
             and line.body[0].targets[0].target.value == optimizer]
    if len(built) != 1:
        return f"`{optimizer}` is not built by one statement of its own"
    value = built[0].body[0].value  # type: ignore[attr-defined]
    first = value.args[0].value if isinstance(value, cst.Call) and value.args and value.args[0].keyword is None \
        and not value.args[0].star else None
    if not (isinstance(first, cst.Call) and not first.args and isinstance(first.func, cst.Attribute)
            and first.func.attr.value == "parameters" and isinstance(first.func.value, cst.Name)):
        return f"`{optimizer}` is not built from one model's `parameters()`"
    return first.func.value.value, built[0]
