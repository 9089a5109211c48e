"""Fixes as text edits, and applying many of them to one file in one pass."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Sequence


class Applicability(str, Enum):
    SAFE = "safe"  # behaviour kept
    UNSAFE = "unsafe"  # numerics or semantics may change; needs --unsafe-fixes


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `content` (offsets in characters of the decoded text)."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...] = field(default_factory=tuple)

    def is_applicable(self, unsafe: bool) -> bool:
        return self.applicability is Applicability.SAFE or unsafe


def _overlaps(a: Edit, b: Edit) -> bool:
    if a == b:
        return False  # identical edits (two fixes adding the same import) merge
    if a.start == a.end and b.start == b.end:
        return a.start == b.start  # two different insertions at one point: order unknown
    return a.start < b.end and b.start < a.end or (
        # an insertion strictly inside a replaced range
        (a.start == a.end and b.start < a.start < b.end)
        or (b.start == b.end and a.start < b.start < a.end)
    )


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply every fix whose edits do not collide with an earlier accepted fix.

    Returns the new text and how many fixes were applied. Colliding fixes are left
    for the next round: the caller lints the result again and repeats.
    """
    ordered = sorted(fixes, key=lambda f: (min((e.start for e in f.edits), default=0), f.message))
    accepted: list[Edit] = []
    applied = 0
    for fix in ordered:
        if not fix.edits:
            continue
        if any(_overlaps(edit, other) for edit in fix.edits for other in accepted):
            continue
        for edit in fix.edits:
            if edit not in accepted:
                accepted.append(edit)
        applied += 1
    return apply_edits(text, accepted), applied


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        pieces.append(text[cursor:edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def minimize(old: str, new: str, offset: int) -> Edit:
    """The smallest edit turning `old` (found at `offset`) into `new`."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return Edit(offset + prefix, offset + len(old) - suffix, new[prefix:len(new) - suffix])
