"""What verify needs to know about each rule, in one table: loss tolerance and runtime evidence.

`tolerance`: how far the rewritten loss may drift (see compare.py for the measurements).
`constructs`: the harness events that show the rewrite actually ran -- an optimizer stepping,
a DataLoader yielding a batch, an autocast region entered, a checkpointed forward -- and
`expected` says what the rewritten construct looks like, used when a construct cannot be tied
to the rewritten lines. A rule whose rewritten construct was not used inside the timed steps
is NOT EXERCISED. (Issue 14 moves the tolerance onto each rule class; until then, here.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from gpulint.verify.compare import FUSED_OPTIMIZER, MIXED_PRECISION, NEUTRAL, Tolerance

Details = dict[str, Any]


@dataclass(frozen=True)
class VerifyRule:
    code: str
    tolerance: Tolerance
    constructs: tuple[str, ...]  # harness construct kinds; empty: the fix has no runtime effect
    evidence: str  # what must happen inside the timed steps, in words
    expected: Callable[[str, Details], bool] = lambda kind, details: True
    mixed_precision: bool = False


def _enabled(kind: str, details: Details) -> bool:
    return details.get("enabled", True) is not False


RULES: dict[str, VerifyRule] = {rule.code: rule for rule in (
    VerifyRule("GPU001", MIXED_PRECISION, ("autocast", "grad_scaler"),
               "the autocast region the rewrite added is entered", _enabled, mixed_precision=True),
    VerifyRule("GPU002", MIXED_PRECISION, ("grad_scaler", "autocast"),
               "the GradScaler the rewrite added scales the loss", _enabled, mixed_precision=True),
    VerifyRule("GPU003", NEUTRAL, ("autocast", "grad_scaler", "custom_fwd"),
               "the renamed torch.amp call runs"),
    VerifyRule("GPU101", NEUTRAL, ("dataloader",), "the DataLoader with pin_memory=True yields batches",
               lambda kind, d: d.get("pin_memory") is True),
    VerifyRule("GPU102", NEUTRAL, ("dataloader",), "the DataLoader with worker processes yields batches",
               lambda kind, d: (d.get("num_workers") or 0) > 0),
    VerifyRule("GPU201", FUSED_OPTIMIZER, ("optimizer",), "the optimizer built with fused=True steps",
               lambda kind, d: d.get("fused") is True),
    VerifyRule("GPU301", NEUTRAL, ("checkpoint",), "the checkpointed forward runs"),
    VerifyRule("GPU302", NEUTRAL, ("checkpoint",), "the checkpoint call with use_reentrant=False runs",
               lambda kind, d: d.get("use_reentrant") is False),
    VerifyRule("GPU900", NEUTRAL, (), "removes an unused suppression comment: nothing to run"),
)}


def rule_for(code: str) -> Optional[VerifyRule]:
    return RULES.get(code)


@dataclass(frozen=True)
class ToleranceChoice:
    tolerance: Tolerance
    decided_by: tuple[str, ...]  # the applied codes that need this tolerance
    unknown: tuple[str, ...] = ()  # applied codes with no registered tolerance (treated as neutral)


def tolerance_for(codes: Iterable[str]) -> ToleranceChoice:
    """The strictest tolerance that every applied fix can meet: the loosest any one of them needs."""
    ordered = sorted(set(codes))
    unknown = tuple(c for c in ordered if c not in RULES)
    chosen = max((RULES[c].tolerance if c in RULES else NEUTRAL for c in ordered), key=lambda t: t.rank,
                 default=NEUTRAL)
    deciding = tuple(c for c in ordered if (RULES[c].tolerance if c in RULES else NEUTRAL) == chosen)
    return ToleranceChoice(chosen, deciding, unknown)


def mixed_precision(codes: Iterable[str]) -> bool:
    return any(RULES[c].mixed_precision for c in codes if c in RULES)
