"""Whole-script facts for the settings rules (GPU401, GPU402, GPU601): does this file train on a CUDA GPU,
in its own loop, and where is a finding about the whole script anchored.

Built on the training-step analysis (analysis/training.py) and the project facts; it adds no step finder.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence
from gpulint.analysis.training import TrainingFacts, training_facts
from gpulint.core.context import FileContext
from gpulint.core.names import dotted


def own_training_loop(ctx: FileContext) -> Optional[TrainingFacts]:
    """The file's training facts when it runs a training step of its own (backward and an optimizer step in
    the same code); None when it has none or a framework (Lightning, HF Trainer, Accelerate, DeepSpeed...)
    owns the loop."""
    facts = ctx.analysis(training_facts)
    if facts.framework_owned or not facts.steps:
        return None
    return facts


def trains_on_cuda(ctx: FileContext, facts: Optional[TrainingFacts]) -> Evidence:
    """Shown when the file runs its own training step and CUDA evidence is in it or a caller."""
    if facts is None:
        return REFUTED
    return cuda_evidence(ctx.project)


def script_anchor(facts: TrainingFacts) -> cst.Call:
    """The first optimizer step of the file, in source order: one place per file for a finding about the
    whole script, on a line the user reads as "the training step"."""
    calls = [s.call for step in facts.steps for s in step.steps]
    if not calls:  # every step has one (TrainingFacts pairs backward with a step); the backward otherwise
        calls = [b.call for step in facts.steps for b in step.backwards]
    return min(calls, key=lambda call: facts.order[id(call)])


# -- convolutions and their input sizes (GPU402) ---------------------------------------------------
CONVOLUTIONS = frozenset(f"torch.nn.{kind}{n}d" for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3)) | frozenset(
    f"torch.nn.modules.conv.{kind}{n}d" for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3))
# torchvision's convnet builders (`torchvision.models.resnet50(...)`)
_CONVNET_PREFIXES = ("resnet", "resnext", "wide_resnet", "vgg", "densenet", "mobilenet", "efficientnet", "regnet",
                     "convnext", "squeezenet", "shufflenet", "mnasnet", "googlenet", "inception", "alexnet")
# datasets whose images all have one size (torchvision stores them as fixed-size arrays)
FIXED_SIZE_DATASETS = frozenset(f"torchvision.datasets.{name}" for name in (
    "MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST", "CIFAR10", "CIFAR100", "SVHN", "STL10"))
# transforms whose output has one size whatever the input
_CROPS = frozenset(f"torchvision.transforms.{v}{name}" for v in ("", "v2.") for name in (
    "RandomResizedCrop", "CenterCrop", "RandomCrop"))
_RESIZES = frozenset({"torchvision.transforms.Resize", "torchvision.transforms.v2.Resize"})
# datasets whose images differ in size, and batching that pads to the longest item
VARIABLE_SIZE_CALLS = frozenset({
    "torchvision.datasets.CocoDetection", "torchvision.datasets.CocoCaptions", "torchvision.datasets.VOCDetection",
    "torchvision.datasets.VOCSegmentation", "torchvision.datasets.ImageFolder", "torchvision.datasets.DatasetFolder",
    "torch.nn.utils.rnn.pad_sequence", "torch.nn.utils.rnn.pack_padded_sequence",
    "torch.nn.utils.rnn.pad_packed_sequence", "torch.nn.functional.interpolate",
})
_VARIABLE_TEXT = ("multi_scale", "multiscale", "multi-scale", "DataCollatorWithPadding", "random_size", "scale_range")


# torchvision convnets without grouped or depthwise convolutions (channels_last can slow those down)
_DENSE_CONVNET_PREFIXES = ("resnet", "wide_resnet", "vgg", "densenet", "googlenet", "inception", "alexnet",
                           "squeezenet")


def convolutions(ctx: FileContext, facts: TrainingFacts, only_dense_2d: bool = False) -> Evidence:
    """Shown when the file builds a convolution layer or a torchvision convnet, or uses a project class that
    builds one; undecided otherwise (a model gpulint cannot read may still convolve). `only_dense_2d`: 2-D
    convolutions without groups (what channels_last speeds up); a grouped one makes it undecided."""
    names = ("Conv2d",) if only_dense_2d else ("Conv1d", "Conv2d", "Conv3d")
    found_conv = False
    for call in facts.calls:
        target = ctx.qualname(call.func) or ""
        if target in CONVOLUTIONS and (not only_dense_2d or target.endswith(("Conv2d", "ConvTranspose2d"))):
            if only_dense_2d and any(a.keyword is not None and a.keyword.value == "groups" for a in call.args):
                return UNDECIDED
            found_conv = True
        last = target.rsplit(".", 1)[-1]
        prefixes = _DENSE_CONVNET_PREFIXES if only_dense_2d else _CONVNET_PREFIXES
        if target.startswith("torchvision.models.") and last.startswith(prefixes) and not (
                only_dense_2d and last.startswith("resnext")):
            found_conv = True
        if only_dense_2d:
            continue  # another file's layers do not say whether they are grouped: its own calls only
        spelled = dotted(call.func)
        found = ctx.project.class_facts(spelled) if spelled else None
        if found is not None and found.layers and any(
                layer.name.rsplit(".", 1)[-1] in names for layer in found.layers):
            found_conv = True
    return SHOWN if found_conv else UNDECIDED


def fixed_input_sizes(ctx: FileContext, facts: TrainingFacts) -> Evidence:
    """Shown when the file's data has one size per batch: a fixed-size torchvision dataset (MNIST, CIFAR...) or
    transforms that crop to a fixed size, and nothing that varies sizes. Refuted by datasets of images of many
    sizes without such a crop, padding to the longest item, multi-scale training, resizing inside the step.
    Undecided without evidence either way (data built elsewhere, a custom collate_fn)."""
    if any(word in ctx.text for word in _VARIABLE_TEXT):
        return REFUTED
    fixed = False
    crops = [c for c in facts.calls if ctx.qualname(c.func) in _CROPS]
    for call in facts.calls:
        target = ctx.qualname(call.func)
        if target in VARIABLE_SIZE_CALLS and not (target.endswith("Folder") and crops):
            return REFUTED
        if target in _RESIZES and not _fixed_resize(call) and not _next_to_crop(ctx, facts, call):
            return REFUTED  # Resize(256) keeps the aspect ratio: sizes vary unless a crop follows
        if target in FIXED_SIZE_DATASETS or target in _CROPS or (target in _RESIZES and _fixed_resize(call)):
            fixed = True
        if any(
                a.keyword is not None and a.keyword.value == "collate_fn" for a in call.args):
            return UNDECIDED  # a collate function may pad
    return SHOWN if fixed else UNDECIDED


def _fixed_resize(call: cst.Call) -> bool:
    """`Resize((224, 224))` / `Resize([h, w])`: one output size."""
    size = call.args[0].value if call.args and call.args[0].keyword is None else next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
    return isinstance(size, (cst.Tuple, cst.List)) and len(size.elements) == 2


def _next_to_crop(ctx: FileContext, facts: TrainingFacts, call: cst.Call) -> bool:
    """The Resize sits in a list (a Compose) that also crops to a fixed size."""
    element = facts.parent(call)
    listed = facts.parent(element) if isinstance(element, cst.Element) else None
    if not isinstance(listed, (cst.List, cst.Tuple)):
        return False
    return any(isinstance(e.value, cst.Call) and ctx.qualname(e.value.func) in _CROPS for e in listed.elements)
