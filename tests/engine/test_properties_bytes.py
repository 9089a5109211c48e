"""The bytes-outside-the-edits invariant, over hostile files (issue 10, item 5).

Files get form feeds (alone, after spaces, before statements and on blank lines), CRLF, CR
and mixed line endings, a BOM, and declared encodings whose text does not round-trip
(cp932's duplicate mappings) or that carry state (utf-7). For each, every fix round is
recorded and replayed here, independently of the engine's own bookkeeping, to prove:

- every byte the fixes did not replace is written back unchanged, in order;
- the bytes written decode to exactly the fixed text, and no form feed is lost;
- the fix is the one gpulint makes on the same file without form feeds;
- fixing twice changes nothing; nothing raises an internal error.

A fix may be refused (never written), but only for utf-7. The corpus test runs every fixture
case that has a fix (so every fix in the rule set) under a rotating variant; the hypothesis
test adds random training programs. Both are deterministic (derandomized, fixed examples).
"""

from __future__ import annotations

import ast
import codecs
import io
import itertools
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpulint.core.edits import Change, Edit, apply_changes, apply_edits, compose
from gpulint.core.settings import Settings
from gpulint.core.source import FixRefused, decode_source
from gpulint.engine import linter
from tests.engine.test_properties import ci, training_programs
from tests.fixture_cases import all_cases

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

ALL = Settings(preview=True)
PATH = Path("hostile.py")

# (codec, BOM, a comment line in that codec: its bytes; None = the text encoded plainly)
ENCODINGS: dict[str, tuple[str, bool, Optional[bytes]]] = {
    "utf-8": ("utf-8", False, "# donn\u00e9es \u2014 caf\u00e9\n".encode()),
    "utf-8-bom": ("utf-8", True, "# \u00e9t\u00e9\n".encode()),
    "latin-1": ("latin-1", False, "# caf\u00e9 \u00a7\n".encode("latin-1")),
    "cp1252": ("cp1252", False, "# \u201csmart\u201d \u20ac\n".encode("cp1252")),
    # 87 9A decodes to U+2235 which encodes back to 81 E6: the text does not round-trip
    "cp932": ("cp932", False, "# \u65e5\u672c ".encode("cp932") + b"\x87\x9a\n"),
    "utf-7": ("utf-7", False, None),
}
NEWLINES = ("\n", "\r\n", "\r", "mixed")


@dataclass(frozen=True)
class Variant:
    encoding: str
    newline: str
    form_feeds: tuple[int, ...]  # indexes of module-level statement lines (and blank lines) to prefix
    spaced: bool  # " \f" instead of "\f"


def module_lines(text: str) -> list[int]:
    """0-based lines where a form feed may go: module-level statements' first lines, blank lines."""
    tree = ast.parse(text)
    rows = {node.lineno - 1 for node in tree.body}
    rows |= {d.lineno - 1 for node in tree.body for d in getattr(node, "decorator_list", [])}
    lines = text.split("\n")
    blank = {i for i, line in enumerate(lines) if not line.strip() and i < len(lines) - 1}
    strings = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            strings.update(range(tok.start[0], tok.end[0]))  # inside a multi-line string: not a line start
    return sorted(rows | (blank - strings))


def make_hostile(text: str, variant: Variant) -> bytes:
    """`text` (with \\n endings) written the hostile way `variant` says."""
    codec, bom, comment = ENCODINGS[variant.encoding]
    lines = text.split("\n")
    for index in variant.form_feeds:
        if index < len(lines):
            lines[index] = (" \f" if variant.spaced else "\f") + lines[index]
    if variant.newline == "mixed":
        endings = itertools.cycle(["\n", "\r\n"])
        body = "".join(line + next(endings) for line in lines[:-1]) + lines[-1]
    else:
        body = variant.newline.join(lines)
    newline = "\r\n" if variant.newline == "mixed" else variant.newline
    head = f"# -*- coding: {codec} -*-{newline}" if codec != "utf-8" else ""
    encoded = head.encode("ascii") + (comment.replace(b"\n", newline.encode()) if comment else b"")
    return (codecs.BOM_UTF8 if bom else b"") + encoded + body.encode(codec)


def char_offsets(data: bytes, codec: str) -> list[int]:
    """Byte offset of every character boundary of `data` decoded with `codec` (stateless codecs)."""
    decoder = codecs.getincrementaldecoder(codec)()
    offsets = [0]
    for position in range(len(data)):
        produced = len(decoder.decode(data[position:position + 1]))
        offsets.extend([position + 1] * produced)
    return offsets


def fix_recording(text: str, settings: Settings, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """linter.fix_text, with every round's (text, edits) recorded."""
    rounds: list[tuple[str, list[Edit]]] = []
    real = linter.apply_edits

    def recording(current: str, edits):  # noqa: ANN001, ANN202
        rounds.append((current, list(edits)))
        return real(current, edits)

    monkeypatch.setattr(linter, "apply_edits", recording)
    try:
        outcome = linter.fix_text(PATH, text, settings, unsafe=True)
    finally:
        monkeypatch.setattr(linter, "apply_edits", real)
    return outcome, rounds


def replay_origins(original: str, rounds: list[tuple[str, list[Edit]]]) -> tuple[str, list[int]]:
    """Replay the rounds on a copy that knows, for each character, where it was in `original`
    (-1 for characters a fix wrote)."""
    text, origin = original, list(range(len(original)))
    for current, edits in rounds:
        assert current == text, "the rounds do not follow each other"
        new_origin: list[int] = []
        cursor = 0
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            new_origin += origin[cursor:edit.start] + [-1] * len(edit.content)
            cursor = edit.end
        new_origin += origin[cursor:]
        text = apply_edits(text, edits)
        origin = new_origin
        assert len(origin) == len(text)
    return text, origin


def check_invariant(raw: bytes, settings: Settings, monkeypatch: pytest.MonkeyPatch,
                    plain: Optional[bytes] = None) -> str:
    """Fix `raw` and prove the invariant; returns "fixed", "unchanged" or "refused"."""
    source = decode_source(raw, PATH)
    outcome, rounds = fix_recording(source.text, settings, monkeypatch)
    if outcome.text == source.text:
        return "unchanged"
    replayed, origin = replay_origins(source.text, rounds)
    assert replayed == outcome.text
    assert apply_changes(source.text, outcome.changes) == outcome.text
    try:
        data = source.encode_edited(outcome.text, outcome.changes)
    except FixRefused:
        assert source.encoding == "utf-7", "a fix was refused on a file gpulint can edit exactly"
        return "refused"
    body, new_body = source.body, data[len(source.raw) - len(source.body):]
    assert data[:len(source.raw) - len(body)] == source.raw[:len(source.raw) - len(body)], "BOM changed"
    assert new_body.decode(source.encoding) == outcome.text
    # (a fix that moves a statement may copy its blank lines, form feed and all: never fewer)
    assert outcome.text.count("\f") >= source.text.count("\f"), "a form feed was lost"
    if source.encoding != "utf-7":  # utf-7 has no per-character byte boundaries; decoding was checked
        old_at, new_at = char_offsets(body, source.encoding), char_offsets(new_body, source.encoding)
        position = 0
        while position < len(origin):  # each run of characters no fix wrote, contiguous in the original
            if origin[position] < 0:
                position += 1
                continue
            end = position + 1
            while end < len(origin) and origin[end] == origin[end - 1] + 1:
                end += 1
            first, last = origin[position], origin[end - 1] + 1
            assert body[old_at[first]:old_at[last]] == new_body[new_at[position]:new_at[end]], \
                f"bytes outside the edits changed: {body[old_at[first]:old_at[last]]!r}"
            position = end
    again = linter.fix_text(PATH, outcome.text, settings, unsafe=True)
    assert again.text == outcome.text and again.applied == 0, "fixing twice changed the file"
    if plain is not None:
        plain_source = decode_source(plain, PATH)
        plain_fixed = linter.fix_text(PATH, plain_source.text, settings, unsafe=True).text
        assert outcome.text.replace(" \f", "").replace("\f", "") == plain_fixed, \
            "the fix differs from the one on the same file without form feeds"
    return "fixed"


def _variants() -> list[Variant]:
    out = []
    for encoding, newline, spaced in itertools.product(ENCODINGS, NEWLINES, (False, True)):
        if encoding == "utf-7" and newline == "\r":
            continue
        out.append(Variant(encoding, newline, (), spaced))
    return out


VARIANTS = _variants()
FIXED_CASES = [case for case in all_cases() if case.fixed_path.exists()]
OUTCOMES: dict[str, int] = {}


@pytest.mark.parametrize("index", range(len(FIXED_CASES)), ids=[c.id for c in FIXED_CASES])
def test_every_fix_works_on_lone_cr_line_endings(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case once more with lines ended by a lone CR, whatever variant the test below draws for it: a
    fix that tested a span for "\n" alone took a two-line condition for one line (GPU506, found when the
    case order changed)."""
    case = FIXED_CASES[index]
    text = case.path.read_text(encoding="utf-8")
    plain = make_hostile(text, Variant("utf-8", "\r", (), False))
    assert check_invariant(plain, case.settings, monkeypatch, plain) == "fixed"


@pytest.mark.parametrize("index", range(len(FIXED_CASES)), ids=[c.id for c in FIXED_CASES])
def test_every_fix_in_the_rule_set_keeps_every_other_byte(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    case = FIXED_CASES[index]
    text = case.path.read_text(encoding="utf-8")
    variant = VARIANTS[index % len(VARIANTS)]
    if not text.isascii() and variant.encoding in ("latin-1", "cp1252", "cp932"):
        variant = Variant("utf-8", variant.newline, (), variant.spaced)
    lines = module_lines(text)
    form_feeds = tuple(lines[index % 3::3])  # a third of the places, a different third per case
    hostile = Variant(variant.encoding, variant.newline, form_feeds, variant.spaced)
    plain = make_hostile(text, Variant(variant.encoding, variant.newline, (), False))
    result = check_invariant(make_hostile(text, hostile), case.settings, monkeypatch, plain)
    assert result in ("fixed", "refused")  # every case has a fix: it must not silently vanish
    if result == "refused":
        assert variant.encoding == "utf-7"


@st.composite
def hostile_programs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    text = draw(training_programs()).replace("\r\n", "\n")
    lines = module_lines(text)
    form_feeds = tuple(sorted(draw(st.sets(st.sampled_from(lines), max_size=4)))) if lines else ()
    encoding = draw(st.sampled_from(sorted(ENCODINGS)))
    newline = draw(st.sampled_from(NEWLINES if encoding != "utf-7" else ("\n", "\r\n")))
    spaced = draw(st.booleans())
    return (make_hostile(text, Variant(encoding, newline, form_feeds, spaced)),
            make_hostile(text, Variant(encoding, newline, (), False)))


@ci(60)
@given(hostile_programs())
def test_bytes_outside_the_edits_never_change_on_generated_files(files: tuple[bytes, bytes]) -> None:
    hostile, plain = files
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_invariant(hostile, ALL, monkeypatch, plain)


@ci(300)
@given(st.text(alphabet="ab\n\f", max_size=40), st.lists(st.lists(st.tuples(
    st.integers(0, 60), st.integers(0, 4), st.text(alphabet="XY\n", max_size=3)), max_size=4), max_size=4))
def test_compose_tracks_what_every_round_changed(original: str, rounds: list) -> None:
    """The engine's own bookkeeping (Change, compose) against a plain replay."""
    text, changes = original, ()
    for raw_edits in rounds:
        edits, cursor = [], 0
        for start, length, content in sorted(raw_edits):
            start = min(max(start, cursor), len(text))
            end = min(start + length, len(text))
            edits.append(Edit(start, end, content))
            cursor = end + 1
        changes = compose(changes, text, edits)
        text = apply_edits(text, edits)
        assert apply_changes(original, changes) == text
        assert all(isinstance(c, Change) and 0 <= c.start <= c.end <= len(original) for c in changes)
        assert all(a.end < b.start or (a.end <= b.start) for a, b in zip(changes, changes[1:]))


def test_a_form_feed_on_a_def_line_keeps_the_fix_inside_its_function() -> None:
    """The scaler goes above the function and its body is rewritten: two changes around a form feed LibCST
    drops, each its own edit (one edit over both would delete the form feed, so the fix was withheld)."""
    case = next(c for c in FIXED_CASES if c.path.name == "comments_stay_with_their_statement.py")
    text = case.path.read_text(encoding="utf-8")
    fed = text.replace("\ndef step", "\n \fdef step")
    plain = linter.fix_text(PATH, text, case.settings, unsafe=True)
    fixed = linter.fix_text(PATH, fed, case.settings, unsafe=True)
    assert fixed.applied == plain.applied == 2
    assert " \fdef step" in fixed.text and fixed.text.replace(" \f", "") == plain.text
