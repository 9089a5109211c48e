"""Write edited cell sources back into the notebook's own text, and nothing else.

Only the `source` values of edited cells are replaced. In a list source (Jupyter's layout,
one JSON string per line) the lines an edit did not touch keep their exact JSON text, and new
lines use the separators the list already has, so the file's diff shows just the edited lines.
Before the bytes are returned, the result is parsed again and compared with the original:
the same JSON in every other place, the new sources where they were asked for, and the same
bytes outside the replaced spans. Any difference raises NotebookError; nothing is written.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Mapping

from gpulint.notebook.model import BOM, Cell, Notebook, NotebookError, SourceLine

_LINE = re.compile(r"[^\n]*\n|[^\n]+")  # Jupyter splits a source after each "\n"


def source_lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _ensure_ascii(text: str) -> bool:
    """Write new strings the way the file does: escaped non-ASCII when it has no raw non-ASCII."""
    return text.isascii() and re.search(r"\\u[0-9a-fA-F]{4}", text) is not None


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else " "


def _layout(notebook: Notebook, cell: Cell) -> tuple[str, str, str]:
    """The text after `[`, between two lines, and before `]` of this cell's list source."""
    text = notebook.text
    start, end = cell.span
    lines = cell.lines or ()
    if len(lines) >= 2:
        return text[start + 1:lines[0].start], text[lines[0].end:lines[1].start], text[lines[-1].end:end - 1]
    if len(lines) == 1:
        opening, closing = text[start + 1:lines[0].start], text[lines[0].end:end - 1]
        return opening, "," + opening if "\n" in opening else ", " if " " in opening else ",", closing
    line_start = text.rfind("\n", 0, start) + 1
    if line_start == 0:  # all on one line (Kaggle's compact JSON)
        return "", ",", ""
    newline = "\r\n" if text[line_start - 2:line_start] == "\r\n" else "\n"
    indent = re.match(r"[ \t]*", text[line_start:]).group()  # type: ignore[union-attr]
    inner = newline + indent + _indent_unit(text)
    return inner, "," + inner, newline + indent


def _render_list(notebook: Notebook, cell: Cell, new_source: str, ascii_only: bool) -> str:
    old: list[SourceLine] = list(cell.lines or ())
    new = source_lines(new_source)
    opening, separator, closing = _layout(notebook, cell)
    items: list[str] = []
    matcher = difflib.SequenceMatcher(None, [line.value for line in old], new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            items.extend(notebook.text[line.start:line.end] for line in old[i1:i2])
        else:
            items.extend(json.dumps(value, ensure_ascii=ascii_only) for value in new[j1:j2])
    if not items:
        return "[]"
    return "[" + opening + separator.join(items) + closing + "]"


def splice_sources(notebook: Notebook, sources: Mapping[int, str]) -> bytes:
    """The notebook's bytes with the given cells' sources (by cell index) replaced; checked."""
    text = notebook.text
    ascii_only = _ensure_ascii(text)
    replacements: list[tuple[int, int, str]] = []
    for cell in notebook.cells:
        new_source = sources.get(cell.index)
        if new_source is None or new_source == cell.source:
            continue
        if cell.lines is None:
            value = json.dumps(new_source, ensure_ascii=ascii_only)
        else:
            value = _render_list(notebook, cell, new_source, ascii_only)
        replacements.append((cell.span[0], cell.span[1], value))
    if not replacements:
        return notebook.raw
    pieces: list[str] = []
    kept: list[tuple[int, int, int]] = []  # (old offset, new offset, length) of untouched text
    position = written = 0
    for start, end, value in sorted(replacements):
        pieces.append(text[position:start])
        kept.append((position, written, start - position))
        written += start - position
        pieces.append(value)
        written += len(value)
        position = end
    pieces.append(text[position:])
    kept.append((position, written, len(text) - position))
    new_text = "".join(pieces)
    _check(notebook, new_text, kept, sources)
    data = new_text.encode("utf-8")
    return BOM + data if notebook.bom else data


def _check(notebook: Notebook, new_text: str, kept: list[tuple[int, int, int]], sources: Mapping[int, str]) -> None:
    """Everything but the asked-for sources is what was read; else NotebookError (never written)."""
    if any(notebook.text[old:old + n] != new_text[new:new + n] for old, new, n in kept):
        raise NotebookError("the fix would change the notebook outside the edited cells; not written")
    try:  # NaN stays a string: NaN != NaN would make equal notebooks differ
        before = json.loads(notebook.text, parse_constant=str)
        after = json.loads(new_text, parse_constant=str)
    except (ValueError, RecursionError):
        raise NotebookError("the fixed notebook is not valid JSON; not written") from None
    if len(before["cells"]) != len(after["cells"]):
        raise NotebookError("the fix would change the notebook's cells; not written")
    for position, (cell_before, cell_after) in enumerate(zip(before["cells"], after["cells"])):
        source = cell_after.get("source")
        joined = "".join(source) if isinstance(source, list) else source
        if joined != sources.get(position, notebook.cells[position].source) or \
                type(source) is not type(cell_before["source"]):
            raise NotebookError(f"cell {position + 1}: the written source differs from the fixed code; not written")
        cell_after["source"] = cell_before["source"]
    if before != after:
        raise NotebookError("the fix would change the notebook's outputs or metadata; not written")
