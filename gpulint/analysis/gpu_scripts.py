"""Whole-script facts for the settings rules (GPU401, GPU402, GPU601): does this file train on a CUDA GPU,
in its own loop, and where is a finding about the whole script anchored.

Built on the training-step analysis (analysis/training.py) and the project facts; it adds no step finder.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, Evidence
from gpulint.analysis.training import TrainingFacts, training_facts
from gpulint.core.context import FileContext


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


def uses_mixed_precision(ctx: FileContext, facts: TrainingFacts) -> bool:
    """16-bit training in this file or around it: autocast mentioned here, a model cast to half/bfloat16, or
    any mixed-precision evidence the project facts hold (autocast, `.half()`, FSDP mixed precision...)."""
    return facts.mentions_autocast or facts.low_precision_model or bool(ctx.project.mixed_precision)
