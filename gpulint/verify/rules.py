"""What verify knows about each rule: its `Verification` (loss tolerance, runtime evidence), read
from the rule classes, and the tolerance a combination of applied fixes gets."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Optional

from gpulint.core.verification import NEUTRAL, Tolerance, Verification
from gpulint.records import dataclass


@lru_cache(maxsize=1)
def verifications() -> dict[str, Verification]:
    """Every rule's verification, by code (imports the rules)."""
    from gpulint.rules import all_rules

    return {rule.code: rule.verification for rule in all_rules() if rule.verification is not None}


def rule_for(code: str) -> Optional[Verification]:
    return verifications().get(code)


@dataclass(frozen=True)
class ToleranceChoice:
    tolerance: Tolerance
    decided_by: tuple[str, ...]  # the applied codes that need this tolerance
    unknown: tuple[str, ...] = ()  # applied codes with no registered tolerance (treated as neutral)


def _tolerance(code: str) -> Tolerance:
    found = rule_for(code)
    return found.tolerance if found is not None else NEUTRAL


def tolerance_for(codes: Iterable[str]) -> ToleranceChoice:
    """The strictest tolerance that every applied fix can meet: the loosest any one of them needs."""
    ordered = sorted(set(codes))
    unknown = tuple(c for c in ordered if rule_for(c) is None)
    chosen = max((_tolerance(c) for c in ordered), key=lambda t: t.rank, default=NEUTRAL)
    deciding = tuple(c for c in ordered if _tolerance(c) == chosen)
    return ToleranceChoice(chosen, deciding, unknown)


def mixed_precision(codes: Iterable[str]) -> bool:
    return any(found.mixed_precision for found in map(rule_for, codes) if found is not None)
