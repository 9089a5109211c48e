"""Suppression comments: which findings they hide, which of them hide nothing, `--add-noqa`.

Line directives, on a line of the reported statement or on an own-line comment just above it:

    loader = DataLoader(ds)  # noqa: GPU101
    loader = DataLoader(ds)  # gpulint: ignore[GPU101, GPU102]
    # gpulint: ignore[GPU101]
    loader = DataLoader(ds)

File directives, on an own line before the first statement (docstring excepted):

    # gpulint: noqa            every finding in the file
    # gpulint: noqa: GPU201    only these codes

A bare `# noqa` hides every finding on its statement, as in ruff and flake8; since other
linters share it, it is never reported as unused. Codes are matched exactly. Syntax errors
(GPU000) cannot be suppressed.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import defaultdict
from dataclasses import field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from gpulint.core.edits import Applicability, Fix
from gpulint.core.findings import Finding, FixEdit, Location
from gpulint.core.lines import LineIndex
from gpulint.records import dataclass
from gpulint.rules import rule_codes
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.rules.gpu900_unused_suppression import (
    NAMES_GPULINT_CODES,
    UnusedSuppression,
)

UNUSED = UnusedSuppression
_CODE = r"[A-Z]+[0-9]+"
_CODE_LIST = rf"{_CODE}(?:[ \t]*,[ \t]*{_CODE}|[ \t]+{_CODE})*"
_NOQA = re.compile(rf"#[ \t]*noqa(?::[ \t]*(?P<codes>{_CODE_LIST})|(?![\w:-]))", re.IGNORECASE)
_IGNORE = re.compile(r"#[ \t]*gpulint:[ \t]*ignore(?:\[(?P<codes>[^\]\r\n]*)\]|(?![\w\[-]))")
_FILE = re.compile(rf"#[ \t]*gpulint:[ \t]*noqa(?::[ \t]*(?P<codes>{_CODE_LIST})|(?![\w:-]))")
_SPLIT = re.compile(r"[\s,]+")
UNSUPPRESSIBLE = frozenset({InvalidFile.code})
# a cheap pre-check on the raw text before tokenizing (with GPU900's NAMES_GPULINT_CODES): a bare noqa
# comment (it matters only when there are findings to hide)
_BARE = re.compile(r"#[ \t]*noqa(?![\w:-])", re.IGNORECASE)


@dataclass
class Comment:
    start: int  # offsets of the whole comment token in the text
    end: int
    row: int
    own_line: bool


@dataclass
class Directive:
    """One suppression directive inside a comment."""

    kind: str  # "noqa", "ignore" or "file"
    comment: Comment
    start: int  # offsets of the directive, from its `#` to the end of its codes
    end: int
    codes: Optional[tuple[str, ...]]  # None: every code
    codes_span: Optional[tuple[int, int]] = None
    in_header: bool = True  # file directives only
    used: set = field(default_factory=set)

    @property
    def row(self) -> int:
        return self.comment.row

    @property
    def own_codes(self) -> tuple[str, ...]:
        """The gpulint codes of the directive; other tools' codes are not ours to judge."""
        return tuple(c for c in self.codes or () if c.startswith("GPU"))

    def covers_code(self, code: str) -> bool:
        return self.codes is None or code in self.codes


@dataclass
class Scan:
    comments: list[Comment]
    unsafe_rows: set[int]  # rows whose end is inside a string or continued with a backslash
    header_end_row: int  # file directives must sit above this row


def _scan_tokens(text: str, index: LineIndex) -> Scan:
    comments: list[Comment] = []
    unsafe: set[int] = set()
    header_end: Optional[int] = None
    expect_docstring = True
    code_rows: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind, (srow, scol), (erow, _ecol) = tok.type, tok.start, tok.end
        if kind == tokenize.COMMENT:
            start = index.starts[srow - 1] + scol
            comments.append(Comment(start, start + len(tok.string), srow, own_line=srow not in code_rows))
            continue
        if kind in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
                    tokenize.ENDMARKER):
            continue
        code_rows.update(range(srow, erow + 1))
        if erow > srow:
            unsafe.update(range(srow, erow))
        if header_end is None:
            if expect_docstring and kind == tokenize.STRING:
                expect_docstring = False
                continue
            header_end = srow
        expect_docstring = False
    for row in range(1, len(index.starts) + 1):
        line = index.line_text(row)
        if line.rstrip().endswith("\\") and not any(c.row == row for c in comments):
            unsafe.add(row)
    return Scan(comments, unsafe, header_end if header_end is not None else len(index.starts) + 1)


def _scan_lines(text: str, index: LineIndex) -> Scan:
    """Fallback when the tokenizer gives up: comments found line by line, quotes counted."""
    comments: list[Comment] = []
    header_end: Optional[int] = None
    for row in range(1, len(index.starts) + 1):
        line = index.line_text(row)
        stripped = line.strip()
        if header_end is None and stripped and not stripped.startswith("#"):
            header_end = row
        position = 0
        while True:
            hash_at = line.find("#", position)
            if hash_at < 0:
                break
            before = line[:hash_at]
            if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                start = index.starts[row - 1] + hash_at
                comments.append(Comment(start, start + len(line) - hash_at, row, own_line=not before.strip()))
                break
            position = hash_at + 1
    rows = set(range(1, len(index.starts) + 1))  # never append to code we could not tokenize
    return Scan(comments, rows, header_end if header_end is not None else len(index.starts) + 1)


def scan(text: str, index: Optional[LineIndex] = None) -> Scan:
    index = index or LineIndex(text)
    if re.search(r"\r(?!\n)", text) is None:
        try:
            return _scan_tokens(text, index)
        except (tokenize.TokenError, SyntaxError):
            pass
    return _scan_lines(text, index)


def _codes(raw: Optional[str]) -> Optional[tuple[str, ...]]:
    if raw is None:
        return None
    return tuple(c.upper() for c in _SPLIT.split(raw.strip()) if c)


def parse_directives(text: str, comments: Iterable[Comment], header_end_row: int,
                     foreign: bool = False) -> list[Directive]:
    """Directives in the comments; `foreign` keeps `# noqa: E501` (other tools' codes only) too."""
    directives: list[Directive] = []
    for comment in comments:
        body = text[comment.start:comment.end]
        for kind, pattern in (("noqa", _NOQA), ("ignore", _IGNORE), ("file", _FILE)):
            for match in pattern.finditer(body):
                codes = _codes(match.group("codes"))
                if kind == "ignore" and codes is not None:
                    if not codes or not all(re.fullmatch(_CODE, c) for c in codes):
                        continue  # malformed: not a directive we act on
                if kind == "noqa" and codes is not None and not foreign and not any(c.startswith("GPU") for c in codes):
                    continue  # another tool's noqa
                span = None
                if match.group("codes") is not None:
                    span = (comment.start + match.start("codes"), comment.start + match.end("codes"))
                directive = Directive(kind, comment, comment.start + match.start(), comment.start + match.end(),
                                      codes, span)
                if kind == "file":
                    directive.in_header = comment.own_line and comment.row < header_end_row
                directives.append(directive)
    return directives


def _statement_rows(finding: Finding) -> tuple[int, int]:
    first, last = finding.noqa_rows
    if first <= 0:
        first, last = finding.location.row, finding.end_location.row
    return first, last


def _line_covers(directive: Directive, finding: Finding) -> bool:
    first, last = _statement_rows(finding)
    row = directive.row
    return first <= row <= last or (directive.comment.own_line and row == first - 1)


def _suppressors(finding: Finding, directives: Sequence[Directive]) -> list[Directive]:
    """Every directive that covers the finding: all count as used, so two comments on one
    statement never make one of them "unused"."""
    if finding.code in UNSUPPRESSIBLE:
        return []
    found = []
    for directive in directives:
        if not directive.covers_code(finding.code):
            continue
        if directive.kind == "file":
            if directive.in_header:
                found.append(directive)
        elif _line_covers(directive, finding):
            found.append(directive)
    return found


def _filter(findings: Iterable[Finding], directives: Sequence[Directive]) -> list[Finding]:
    kept = []
    for finding in findings:
        covering = _suppressors(finding, directives)
        if not covering:
            kept.append(finding)
        for directive in covering:
            directive.used.add(finding.code)
    return kept


def _removal(text: str, directive: Directive) -> tuple[int, int]:
    """The text range to delete so the directive is gone and the rest of the comment stays."""
    comment = directive.comment
    next_hash = text.find("#", directive.end, comment.end)
    segment_end = next_hash if next_hash >= 0 else comment.end
    if next_hash >= 0:  # more comment follows ("# noqa: GPU101  # type: ignore"): keep it
        return directive.start, segment_end
    if directive.start > comment.start:  # it ends the comment: drop it with the space before it
        start = directive.start
        while start > comment.start and text[start - 1] in " \t":
            start -= 1
        return start, comment.end
    # the directive is the whole comment
    start = comment.start
    line_start = text.rfind("\n", 0, start) + 1
    line_start = max(line_start, text.rfind("\r", 0, start) + 1)
    if comment.own_line:
        page_break = text.rfind("\f", line_start, start)
        if page_break >= 0:  # a form feed is a page break, not part of the comment: it stays
            return page_break + 1, comment.end
        end = comment.end
        for newline in ("\r\n", "\n", "\r"):
            if text.startswith(newline, end):
                end += len(newline)
                break
        return line_start, end
    while start > line_start and text[start - 1] in " \t":
        start -= 1
    return start, comment.end


def _unused_finding(path: str, text: str, index: LineIndex, directive: Directive,
                    unused: Sequence[str], known: frozenset) -> Finding:
    shown = text[directive.start:directive.end]
    unknown = [c for c in unused if c not in known and re.fullmatch(_CODE, c)]
    fix: Optional[Fix[FixEdit]] = None
    if directive.kind == "file" and not directive.in_header:
        message = f"File-level `{shown}` below the first statement has no effect; move it to the top of the file"
    else:
        if directive.codes is None or set(unused) >= set(directive.codes):
            start, end = _removal(text, directive)
            content = ""
            message = f"Unused suppression `{shown}`"
            fix_message = "Remove the unused suppression"
        else:
            assert directive.codes_span is not None
            start, end = directive.codes_span
            content = ", ".join(c for c in directive.codes if c not in unused)
            message = f"Unused code{'s' if len(unused) > 1 else ''} {', '.join(unused)} in `{shown}`"
            fix_message = f"Remove {', '.join(unused)} from the suppression"
        if unknown:
            message += f" ({', '.join(unknown)}: no such gpulint rule)"
        edit = FixEdit(start, end, content, Location(*index.location(start)), Location(*index.location(end)))
        fix = Fix(Applicability.SAFE, fix_message, (edit,))
    location = Location(*index.location(directive.start))
    return Finding(
        path=path, code=UNUSED.code, name=UNUSED.name, message=message, location=location,
        end_location=Location(*index.location(directive.end)), fix=fix,
        noqa_rows=(location.row, location.row),
    )


def unused_codes(directive: Directive, known: frozenset, enabled: frozenset) -> list[str]:
    if directive.kind == "file" and not directive.in_header:
        return list(directive.own_codes) or ["*"]
    if directive.codes is None:
        if directive.kind == "noqa":
            return []  # shared with other linters
        return [] if directive.used else ["*"]
    out = []
    for code in directive.own_codes:
        if code in directive.used or code == UNUSED.code or code in out:
            continue
        if code not in known or code in enabled:
            out.append(code)
    return out


def apply_suppressions(path: Path, text: str, findings: list[Finding], enabled_codes: Iterable[str]) -> list[Finding]:
    """Drop suppressed findings; add GPU900 findings for directives that hid nothing."""
    if not NAMES_GPULINT_CODES.search(text) and not (findings and _BARE.search(text)):
        return findings
    index = LineIndex(text)
    scanned = scan(text, index)
    directives = parse_directives(text, scanned.comments, scanned.header_end_row)
    if not directives:
        return findings
    kept = _filter(findings, directives)
    enabled = frozenset(enabled_codes)
    if UNUSED.code not in enabled:
        return kept
    known = frozenset(rule_codes())
    extra = []
    for directive in directives:
        unused = unused_codes(directive, known, enabled)
        if unused:
            extra.append(_unused_finding(str(path), text, index, directive, unused, known))
    kept.extend(_filter(extra, directives))
    kept.sort(key=lambda f: f.sort_key)
    return kept


# ---------------------------------------------------------------------------------------------
# --add-noqa

def add_noqa(text: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """Text with `# noqa: CODE` added for each finding; returns it and how many findings it covers.

    The comment goes on the flagged line when a comment can end it, else on another line of
    the statement; an existing `# noqa: ...` on that line gets the code appended.
    """
    from gpulint.core.edits import Edit, apply_edits

    wanted = [f for f in findings if f.code not in UNSUPPRESSIBLE and f.code != UNUSED.code]
    if not wanted:
        return text, 0
    index = LineIndex(text)
    scanned = scan(text, index)
    directives = parse_directives(text, scanned.comments, scanned.header_end_row, foreign=True)
    noqa_by_row = {d.row: d for d in directives if d.kind == "noqa" and d.codes is not None}
    last_row = len(index.starts)
    codes_by_row: dict[int, list[str]] = defaultdict(list)
    covered = 0
    for finding in wanted:
        first, last = _statement_rows(finding)
        if any(first <= r <= last and finding.code in codes for r, codes in codes_by_row.items()):
            covered += 1  # this run already suppresses the code on this statement
            continue
        rows = [finding.location.row] + [r for r in range(first, last + 1) if r != finding.location.row]
        row = next((r for r in rows if 1 <= r <= last_row and r not in scanned.unsafe_rows), None)
        if row is None:
            continue
        if finding.code not in codes_by_row[row]:
            codes_by_row[row].append(finding.code)
        covered += 1
    edits = []
    for row, codes in codes_by_row.items():
        existing = noqa_by_row.get(row)
        if existing is not None and existing.codes_span is not None:
            new = [c for c in codes if c not in (existing.codes or ())]
            if new:
                end = existing.codes_span[1]
                edits.append(Edit(end, end, ", " + ", ".join(new)))
            continue
        line = index.line_text(row)
        end = index.starts[row - 1] + len(line.rstrip())
        if not line.strip():
            continue
        edits.append(Edit(end, end, f"  # noqa: {', '.join(codes)}"))
    return apply_edits(text, edits), covered
