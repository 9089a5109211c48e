"""Whole-script facts for the settings rules (GPU401, GPU402, GPU601): does this file train on a CUDA GPU,
in its own loop, and where is a finding about the whole script anchored.

Built on the training-step analysis (analysis/training.py) and the project facts; it adds no step finder.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence
from gpulint.analysis.script_settings import CONVNET_PREFIXES, CONVOLUTIONS, DENSE_CONVNET_PREFIXES
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


# -- convolutions (GPU404; GPU402 reads them on ast: analysis/script_settings.py, whose names these are) ----
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
        prefixes = DENSE_CONVNET_PREFIXES if only_dense_2d else CONVNET_PREFIXES
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
