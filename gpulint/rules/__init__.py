"""The rule registry. One module per rule family; every rule listed here is shipped."""

from __future__ import annotations

from gpulint.engine.fixes import Applicability
from gpulint.rules.amp import DeprecatedCudaAmp, Fp16WithoutGradScaler, MissingAutocast
from gpulint.rules.base import Rule, RuleDocs, Target
from gpulint.rules.checkpointing import CheckpointWithoutUseReentrant, DeepStackWithoutCheckpointing
from gpulint.rules.dataloader import DataLoaderNumWorkers, DataLoaderPinMemory
from gpulint.rules.optimizers import NonFusedOptimizer
from gpulint.rules.unused_suppression import UnusedSuppression


class SyntaxErrorRule(Rule):
    """Not a visitor: the engine reports files it cannot read or parse under this code."""

    code = "GPU000"
    name = "invalid-file"
    summary = "File cannot be read or parsed"
    impact = "a file nobody checks fails the gate instead"
    docs = RuleDocs(
        what="""
        Reports a file gpulint could not analyse: a syntax error, bytes that do not decode,
        a binary file, or a file that cannot be read.
        """,
        why="""
        A file that is silently skipped is a file nobody checks. The other files are still
        linted; this finding makes the run exit 1 so a CI gate notices.
        """,
        example="""
        def train(:
            ...
        """,
        use_instead="""
        def train():
            ...
        """,
        fix_safety="No fix.",
    )


SYNTAX_ERROR = SyntaxErrorRule

ALL_RULES: tuple[type[Rule], ...] = (
    MissingAutocast,
    Fp16WithoutGradScaler,
    DeprecatedCudaAmp,
    DataLoaderPinMemory,
    DataLoaderNumWorkers,
    NonFusedOptimizer,
    DeepStackWithoutCheckpointing,
    CheckpointWithoutUseReentrant,
)

# GPU900 judges the suppression comments of the rules above once they have all reported
ALL_RULES += (UnusedSuppression,)

DOCUMENTED_RULES: tuple[type[Rule], ...] = (SyntaxErrorRule,) + ALL_RULES


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in DOCUMENTED_RULES:
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None


__all__ = ["ALL_RULES", "DOCUMENTED_RULES", "SYNTAX_ERROR", "Applicability", "Rule", "RuleDocs", "Target", "rule_by_code"]
