"""Whole-script facts on `ast` for the settings rules (GPU402, GPU601; GPU404 reads its convolutions): does the
file run its own training loop on CUDA, where is a finding about the whole script anchored, does it convolve,
are its input sizes fixed. No LibCST here: ast rules import it.
"""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.ast_context import AstContext, dotted
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence
from gpulint.analysis.steps import StepFacts, step_facts
from gpulint.project.layers import linear_only

CONVOLUTIONS = frozenset(f"torch.nn.{kind}{n}d" for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3)) | frozenset(
    f"torch.nn.modules.conv.{kind}{n}d" for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3))
# torchvision's convnet builders (`torchvision.models.resnet50(...)`)
CONVNET_PREFIXES = ("resnet", "resnext", "wide_resnet", "vgg", "densenet", "mobilenet", "efficientnet", "regnet",
                    "convnext", "squeezenet", "shufflenet", "mnasnet", "googlenet", "inception", "alexnet")
# torchvision convnets without grouped or depthwise convolutions (channels_last can slow those down)
DENSE_CONVNET_PREFIXES = ("resnet", "wide_resnet", "vgg", "densenet", "googlenet", "inception", "alexnet",
                          "squeezenet")
# datasets whose images all have one size (torchvision stores them as fixed-size arrays)
FIXED_SIZE_DATASETS = frozenset(f"torchvision.datasets.{name}" for name in (
    "MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST", "CIFAR10", "CIFAR100", "SVHN", "STL10"))
# transforms whose output has one size whatever the input
CROPS = frozenset(f"torchvision.transforms.{v}{name}" for v in ("", "v2.") for name in (
    "RandomResizedCrop", "CenterCrop", "RandomCrop"))
RESIZES = frozenset({"torchvision.transforms.Resize", "torchvision.transforms.v2.Resize"})
# datasets whose images differ in size, and batching that pads to the longest item
VARIABLE_SIZE_CALLS = frozenset({
    "torchvision.datasets.CocoDetection", "torchvision.datasets.CocoCaptions", "torchvision.datasets.VOCDetection",
    "torchvision.datasets.VOCSegmentation", "torchvision.datasets.ImageFolder", "torchvision.datasets.DatasetFolder",
    "torch.nn.utils.rnn.pad_sequence", "torch.nn.utils.rnn.pack_padded_sequence",
    "torch.nn.utils.rnn.pad_packed_sequence", "torch.nn.functional.interpolate",
})
VARIABLE_TEXT = ("multi_scale", "multiscale", "multi-scale", "DataCollatorWithPadding", "random_size", "scale_range")


def own_steps(ctx: AstContext) -> Optional[StepFacts]:
    """The file's step loops when it has some and runs them itself: None without a step loop, or when a
    framework (Lightning, HF Trainer, Accelerate, DeepSpeed...) is imported or owns one."""
    steps = ctx.analysis(step_facts)
    if not steps.steps or steps.imported_frameworks() or any(s.framework_owned for s in steps.steps):
        return None
    return steps


def trains_on_cuda(ctx: AstContext, steps: Optional[StepFacts]) -> Evidence:
    """Shown when the file runs its own training step and CUDA evidence is in it or a caller."""
    return REFUTED if steps is None else cuda_evidence(ctx.project)


def script_anchor(steps: StepFacts) -> ast.Call:
    """The first optimizer step of the file in source order: one place per file for a finding about the whole
    script, on a line the user reads as "the training step"."""
    calls = [s.call for step in steps.steps for s in step.steps] or [b.call for step in steps.steps
                                                                     for b in step.backwards]
    return min(calls, key=lambda call: (call.lineno, call.col_offset))


def convolutions(ctx: AstContext, only_dense_2d: bool = False) -> Evidence:
    """Shown when the file builds a convolution layer or a torchvision convnet, or uses a project class that
    builds one; undecided otherwise (a model gpulint cannot read may still convolve). `only_dense_2d` (GPU404):
    2-D convolutions without groups (what channels_last speeds up); a grouped one makes it undecided, and
    another file's classes do not count (their layers do not say whether they are grouped)."""
    found = False
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        target = ctx.qualname(call.func) or ""
        last = target.rsplit(".", 1)[-1]
        if only_dense_2d:
            if target in CONVOLUTIONS and target.endswith(("Conv2d", "ConvTranspose2d")):
                if any(k.arg == "groups" for k in call.keywords):
                    return UNDECIDED
                found = True
            if target.startswith("torchvision.models.") and last.startswith(DENSE_CONVNET_PREFIXES) \
                    and not last.startswith("resnext"):
                found = True
            continue
        if target in CONVOLUTIONS:
            return SHOWN
        if target.startswith("torchvision.models.") and last.startswith(CONVNET_PREFIXES):
            return SHOWN
        spelled = dotted(call.func)
        classes = ctx.project.class_facts(spelled) if spelled else None
        if classes is not None and classes.layers and any(
                layer.name.rsplit(".", 1)[-1] in ("Conv1d", "Conv2d", "Conv3d") for layer in classes.layers):
            return SHOWN
    return SHOWN if found else UNDECIDED


# torch.nn layers that do their work in matmuls: a model built of them is matmul-bound
_MATMUL_MODULES = frozenset({"Bilinear", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention",
                             "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                             "TransformerDecoderLayer"})
# spellings of calls that build a model gpulint cannot read (a hub, a registry of another library, a helper)
_MODEL_WORDS = ("model", "net", "backbone", "encoder", "decoder", "transformer", "from_pretrained")
_MODEL_CHANGES = ("convert", "wrap", "save", "print", "summar", "freeze", "unwrap")  # take a model, build none
_MODEL_LIBRARIES = ("torch.hub.", "timm.", "transformers.", "open_clip.", "clip.")


def convnet_with_head(ctx: AstContext) -> Evidence:
    """Shown when every model the file builds is a convnet whose Linear layers are only a head (a torchvision
    convnet, a project class `ClassFacts.convnet` marks, one taken from a project module used as a registry,
    `models.__dict__[arch](...)`, whose classes are such convnets), or a Linear-only head beside one (a linear
    probe); refuted when the file builds any other model (attention, recurrent layers, a transformer's
    blocks, a library model); undecided when it builds no model gpulint can read. GPU401's "matmul-bound":
    convolutions already run in TF32 by default, so the matmul setting reaches only the head."""
    project = ctx.project
    convnet = False
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        func = call.func
        target = ctx.qualname(func) or ""
        last = target.rsplit(".", 1)[-1]
        if target.startswith("torchvision.models."):
            if not last.startswith(CONVNET_PREFIXES):
                return REFUTED
            convnet = True
            continue
        if target.startswith("torch.nn."):
            if last in _MATMUL_MODULES:
                return REFUTED
            convnet = convnet or target in CONVOLUTIONS
            continue
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute) \
                and func.value.attr == "__dict__" and isinstance(func.value.value, ast.Name):
            module = ctx.qualname(func.value.value)
            members = [c for key, c in project.imported_classes.items()
                       if module and key.startswith(module + ".") and c.module]
            if not any(c.convnet for c in members):
                return REFUTED  # a registry of models that are not all convnets, or one not read
            convnet = True
            continue
        spelled = dotted(func)
        found = (project.class_facts(spelled) if spelled else None) or (
            project.class_facts(target) if target else None)
        if found is not None and found.module and found.dataset is None \
                and not any(b.startswith("torchvision.datasets.") for b in found.bases):  # a dataset is no model
            if found.convnet:
                convnet = True
            elif not linear_only(found.layers):
                return REFUTED
            continue
        called = target.rsplit(".", 1)[-1].lower()  # an imported callable (not a model the file calls)
        if found is None and target and (target.startswith(_MODEL_LIBRARIES) or (
                any(w in called for w in _MODEL_WORDS) and not called.startswith(_MODEL_CHANGES))):
            return REFUTED  # `build_model(cfg)`, `timm.create_model(...)`: a model gpulint does not read
    return SHOWN if convnet else UNDECIDED


def fixed_input_sizes(ctx: AstContext) -> Evidence:
    """Shown when the file's data has one size per batch: a fixed-size torchvision dataset (MNIST, CIFAR...) or
    transforms that crop to a fixed size, and nothing that varies sizes. Refuted by datasets of images of many
    sizes without such a crop, padding to the longest item, multi-scale training, resizing inside the step.
    Undecided without evidence either way (data built elsewhere, a custom collate_fn)."""
    if any(word in ctx.text for word in VARIABLE_TEXT):
        return REFUTED
    calls = [c for c in ctx.nodes(ast.Call) if isinstance(c, ast.Call)]
    crops = [c for c in calls if ctx.qualname(c.func) in CROPS]
    fixed = False
    for call in calls:
        target = ctx.qualname(call.func)
        if target in VARIABLE_SIZE_CALLS and not (target.endswith("Folder") and crops):
            return REFUTED
        if target in RESIZES and not _fixed_resize(call) and not _next_to_crop(ctx, call):
            return REFUTED  # Resize(256) keeps the aspect ratio: sizes vary unless a crop follows
        if target in FIXED_SIZE_DATASETS or target in CROPS or (target in RESIZES and _fixed_resize(call)):
            fixed = True
        if any(k.arg == "collate_fn" for k in call.keywords):
            return UNDECIDED  # a collate function may pad
    return SHOWN if fixed else UNDECIDED


def _fixed_resize(call: ast.Call) -> bool:
    """`Resize((224, 224))` / `Resize([h, w])`: one output size."""
    size = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "size"), None)
    return isinstance(size, (ast.Tuple, ast.List)) and len(size.elts) == 2


def _next_to_crop(ctx: AstContext, call: ast.Call) -> bool:
    """The Resize sits in a list (a Compose) that also crops to a fixed size."""
    listed = ctx.parent(call)
    if not isinstance(listed, (ast.List, ast.Tuple)):
        return False
    return any(isinstance(e, ast.Call) and ctx.qualname(e.func) in CROPS for e in listed.elts)


def torch_import_alias(tree: ast.Module) -> Optional[str]:
    """The name of the first top-level `import torch [as x]`: where a script-wide setting can follow
    (rewrites/after_imports.py finds the same statement on LibCST)."""
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "torch":
                    return alias.asname or "torch"
    return None
