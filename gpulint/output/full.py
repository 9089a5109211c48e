"""`--output-format full`: each finding with its source lines and its fix as a diff."""

from __future__ import annotations

import difflib
from typing import Optional, Sequence

from gpulint.core.edits import apply_edits
from gpulint.core.findings import Finding, FixEdit
from gpulint.output.display import RenderContext
from gpulint.output.text import concise_line

CONTEXT_LINES = 1
MAX_SPAN_LINES = 6  # longer spans show their first and last lines only


def _display(line: str) -> str:
    return line.replace("\t", "    ")


def snippet(finding: Finding, lines: list[str]) -> list[str]:
    start, end = finding.location, finding.end_location
    first = max(1, start.row - CONTEXT_LINES)
    last = min(len(lines), max(start.row, end.row) + CONTEXT_LINES)
    rows = list(range(first, last + 1))
    if len(rows) > MAX_SPAN_LINES + 2 * CONTEXT_LINES:
        head = rows[: CONTEXT_LINES + 3]
        tail = rows[-(CONTEXT_LINES + 2):]
        rows = head + [0] + tail
    width = len(str(last))
    out = [" " * width + " |"]
    for row in rows:
        if row == 0:
            out.append(" " * width + " ...")
            continue
        text = lines[row - 1] if row - 1 < len(lines) else ""
        out.append(f"{row:>{width}} | {_display(text)}".rstrip())
        if row == start.row:
            prefix = _display(text[: start.column - 1])
            if end.row == start.row:
                length = max(1, len(_display(text[start.column - 1: end.column - 1])))
            else:
                length = max(1, len(_display(text)) - len(prefix))
            out.append(" " * width + " | " + " " * len(prefix) + "^" * length + f" {finding.code}")
    out.append(" " * width + " |")
    return out


def fix_diff(finding: Finding, text: str, edits: Optional[Sequence[FixEdit]] = None) -> list[str]:
    assert finding.fix is not None
    after = apply_edits(text, finding.fix.edits if edits is None else edits)
    diff = difflib.unified_diff(text.splitlines(), after.splitlines(), lineterm="", n=1)
    return [line for line in diff if not line.startswith(("---", "+++"))]


def _fix_lines(finding: Finding, ctx: RenderContext) -> list[str]:
    """The fix as a diff; a notebook's fix, one diff per cell it edits, each named."""
    assert finding.fix is not None
    own = finding.cell.number if finding.cell is not None else None
    cells = sorted({e.cell for e in finding.fix.edits}, key=lambda c: (c is not None, c or 0))
    out = []
    for cell in cells:
        text = ctx.cell_text(finding.path, cell if cell is not None else own)
        if text is None:
            continue
        if cell is not None and (cell != own or len(cells) > 1):
            out.append(f"cell {cell}:")
        out.extend(fix_diff(finding, text, [e for e in finding.fix.edits if e.cell == cell]))
    return out


def render_finding(finding: Finding, ctx: RenderContext) -> str:
    out = [concise_line(finding, ctx.unsafe_fixes)]
    text: Optional[str] = ctx.cell_text(finding.path, finding.cell.number if finding.cell is not None else None)
    if text is not None:
        out.extend("  " + line if line else "" for line in snippet(finding, text.splitlines()))
    if finding.fix is not None:
        label = "Safe fix" if finding.fix.applicability.value == "safe" else "Unsafe fix (needs --unsafe-fixes)"
        out.append(f"  = {label}: {finding.fix.message}")
        out.extend("    " + line for line in _fix_lines(finding, ctx))
    if finding.note:
        out.append(f"  = note: {finding.note}")
    return "\n".join(out) + "\n"


def render_full(findings: Sequence[Finding], ctx: Optional[RenderContext] = None) -> str:
    ctx = ctx or RenderContext()
    return "\n".join(render_finding(f, ctx) for f in findings) + ("\n" if findings else "")
