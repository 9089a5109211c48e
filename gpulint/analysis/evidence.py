"""Evidence for the premises of a finding: report what the project shows, stay silent on a guess.

Every rule's message rests on premises ("the step runs on a CUDA GPU", "the batches are CPU
tensors that reach it", "the model is wide enough for tensor cores"). Each premise is written
down once, in the rule's docs (`RuleDocs.premises`), and the detector answers each one for the
code at hand with an `Evidence`: shown, refuted, or undecided. A finding is reported only when
every premise is shown; an undecided one (unknown is not evidence) keeps the rule silent unless
`strictness = "pedantic"`, and a refuted one always does. The helpers here are plain functions
over plain values so that any analysis (LibCST today, CPython's `ast` after the port) can use them.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable, Mapping, Optional

from gpulint.core.options import STRICTNESS
from gpulint.records import dataclass


class Evidence(Enum):
    SHOWN = "shown"  # the project shows that the premise holds
    REFUTED = "refuted"  # the project shows that it does not
    UNDECIDED = "undecided"  # nothing either way: not evidence

    @classmethod
    def of(cls, known: Optional[bool]) -> "Evidence":
        """True -> shown, False -> refuted, None -> undecided."""
        if known is None:
            return cls.UNDECIDED
        return cls.SHOWN if known else cls.REFUTED


SHOWN, REFUTED, UNDECIDED = Evidence.SHOWN, Evidence.REFUTED, Evidence.UNDECIDED


def all_of(*items: Evidence) -> Evidence:
    """Refuted when one is, shown when all are, else undecided."""
    if REFUTED in items:
        return REFUTED
    return SHOWN if all(item is SHOWN for item in items) else UNDECIDED


def any_of(*items: Evidence) -> Evidence:
    """Shown when one is, refuted when all are, else undecided."""
    if SHOWN in items:
        return SHOWN
    return REFUTED if items and all(item is REFUTED for item in items) else UNDECIDED


@dataclass(frozen=True)
class Premise:
    """One premise of a rule's message; `text` is what the docs say must be shown."""

    key: str  # short, stable: "on-gpu"
    text: str  # one sentence: what counts as evidence, and what refutes it


@dataclass(frozen=True)
class Decision:
    """Whether to report, and which premises were only assumed (pedantic mode)."""

    report: bool
    undecided: tuple[Premise, ...] = ()

    @property
    def assumed(self) -> bool:
        return self.report and bool(self.undecided)


def decide(evidence: Mapping[Premise, Evidence], pedantic: bool) -> Decision:
    """Report when every premise is shown; with `pedantic`, also when some are undecided (never when
    one is refuted)."""
    if REFUTED in evidence.values():
        return Decision(False)
    undecided = tuple(premise for premise, found in evidence.items() if found is UNDECIDED)
    if undecided and not pedantic:
        return Decision(False, undecided)
    return Decision(True, undecided)


def pedantic(settings: object) -> bool:
    """Whether the settings ask for findings whose premises are undecided (`strictness = "pedantic"`)."""
    value = getattr(settings, "value", None)
    return value is not None and value(STRICTNESS) == "pedantic"


def undecided_note(premises: Iterable[Premise]) -> str:
    """What a pedantic finding's note says first: the premises gpulint could not decide (the message stays
    one short claim)."""
    keys = ", ".join(p.key for p in premises)
    return f"pedantic: not shown here: {keys}" if keys else ""
