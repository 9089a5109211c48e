"""Fixes as text edits, and applying many of them to one file in one pass.

Rules describe fixes on CST nodes (core/pending.py); the engine places them as `Fix`es of
`FixEdit`s (offsets plus the rows and columns output formats print, core/findings.py). Here
they are plain text: which edits of many fixes go together, and what the text becomes.
"""

from __future__ import annotations

from dataclasses import field
from enum import Enum
from typing import Any, Generic, Iterable, Sequence, TypeVar

from gpulint.records import dataclass


class Applicability(str, Enum):
    SAFE = "safe"  # behaviour kept
    UNSAFE = "unsafe"  # numerics or semantics may change; needs --unsafe-fixes


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `content` (offsets in characters of the decoded text)."""

    start: int
    end: int
    content: str


E = TypeVar("E", bound=Edit)


@dataclass(frozen=True)
class Fix(Generic[E]):
    """Edits that belong together, and whether applying them keeps behaviour."""

    applicability: Applicability
    message: str
    edits: tuple[E, ...] = field(default_factory=tuple)

    def is_applicable(self, unsafe: bool) -> bool:
        return self.applicability is Applicability.SAFE or unsafe


def _overlaps(a: Edit, b: Edit) -> bool:
    if a == b:
        return False  # identical edits (two fixes adding the same import) merge
    if a.start == a.end and b.start == b.end:
        return a.start == b.start  # two different insertions at one point: order unknown
    return a.start < b.end and b.start < a.end or (
        # an insertion inside a replaced range, or at its edge: `f(a, b)` laid out anew by one fix and
        # `, c` added after `b` by another would leave `,\n, c` (which side comes first is unknown)
        (a.start == a.end and b.start <= a.start <= b.end)
        or (b.start == b.end and a.start <= b.start <= a.end)
    )


def select_edits(fixes: Iterable[Fix[Any]]) -> tuple[list[Edit], int]:
    """The edits of every fix that does not collide with an earlier one, and how many fixes that is."""
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
    return accepted, applied


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


@dataclass(frozen=True)
class Change:
    """`original[start:end]` became `text`: the net effect of every fix round on one region.

    Offsets are in characters of the text as read. The changes of a fixed file say exactly
    which parts of it gpulint meant to touch; everything between them must come out unchanged
    (checked byte for byte before writing, see `SourceFile.encode_edited`).
    """

    start: int
    end: int
    text: str


def apply_changes(original: str, changes: Sequence[Change]) -> str:
    return apply_edits(original, [Edit(c.start, c.end, c.text) for c in changes])


def compose(changes: Sequence[Change], current: str, edits: Sequence[Edit]) -> tuple[Change, ...]:
    """The changes from the original text to `current` with `edits` applied.

    `changes` lead from the original to `current`; `edits` are offsets in `current`. Edits that
    overlap or touch an earlier change merge with it, so a region is never counted twice.
    """
    items: list[tuple[int, int, int, int]] = []  # (current start, current end, original start, original end)
    shift = 0
    for change in sorted(changes, key=lambda c: (c.start, c.end)):
        cur_start = change.start + shift
        items.append((cur_start, cur_start + len(change.text), change.start, change.end))
        shift += len(change.text) - (change.end - change.start)
    spans = sorted([(s, e, i) for i, (s, e, _, _) in enumerate(items)] + [(e.start, e.end, -1) for e in edits])
    groups: list[list[tuple[int, int, int]]] = []
    for span in spans:
        if groups and span[0] <= max(s[1] for s in groups[-1]):
            groups[-1].append(span)
        else:
            groups.append([span])

    def original_offset(offset: int, members: list[tuple[int, int, int]], at_end: bool) -> int:
        for _, _, index in members:
            if index >= 0:
                cur_start, cur_end, orig_start, orig_end = items[index]
                if offset == (cur_end if at_end else cur_start):
                    return orig_end if at_end else orig_start
        before = sum((e - s) - (oe - os) for s, e, os, oe in items if e <= offset)
        return offset - before

    out = []
    for members in groups:
        start, end = min(m[0] for m in members), max(m[1] for m in members)
        inner = [Edit(e.start - start, e.end - start, e.content) for e in edits if start <= e.start and e.end <= end]
        out.append(Change(original_offset(start, members, False), original_offset(end, members, True),
                          apply_edits(current[start:end], inner)))
    return tuple(out)


def diff_changes(old: str, new: str) -> tuple[Change, ...]:
    """Changes from `old` to `new` line by line, for writers that do not track their edits."""
    import difflib

    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    old_starts, new_starts = [0], [0]
    for line in old_lines:
        old_starts.append(old_starts[-1] + len(line))
    for line in new_lines:
        new_starts.append(new_starts[-1] + len(line))
    out = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.append(Change(old_starts[i1], old_starts[i2], new[new_starts[j1]:new_starts[j2]]))
    return tuple(out)
