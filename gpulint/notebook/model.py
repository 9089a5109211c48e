"""A notebook as read: its cells, and where each code cell's source sits in the file's text.

`fix` must change nothing but the sources it edits, so the notebook is not loaded and dumped
again (that would re-indent, re-escape and re-order what Jupyter, Colab or Kaggle wrote): the
file's JSON text is kept, and the exact span of every cell's `source` value (and of each line
of a list source) is found by a small scanner, so an edited source can be spliced in place.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in typeshed; stdlib since 2.6
from typing import Any, Callable, Generator, Optional

from gpulint.records import dataclass

BOM = b"\xef\xbb\xbf"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
PYTHON_LANGUAGES = frozenset({"python", "python3", "ipython", "ipython3", "python2"})


class NotebookError(Exception):
    """A file named .ipynb that is not a notebook gpulint can read; shown to the user as is."""


@dataclass(frozen=True)
class SourceLine:
    """One string of a list source: its value and the span of its JSON text (quotes included)."""

    value: str
    start: int
    end: int


@dataclass(frozen=True)
class Cell:
    index: int  # 0-based position in the notebook's cells
    cell_type: str
    id: Optional[str]  # nbformat 4.5 `id`, else Colab's `metadata.id`
    source: str  # the lines joined, as the kernel sees them
    span: tuple[int, int]  # the `source` value's JSON text, brackets or quotes included
    lines: Optional[tuple[SourceLine, ...]]  # None: the source is one JSON string

    @property
    def number(self) -> int:
        """The cell as people count it: 1 is the first cell of the notebook, markdown included."""
        return self.index + 1

    @property
    def is_code(self) -> bool:
        return self.cell_type == "code"


@dataclass(frozen=True)
class Notebook:
    raw: bytes
    text: str  # `raw` decoded, without a BOM
    bom: bool
    cells: tuple[Cell, ...]
    nbformat_minor: int
    language: Optional[str]  # the kernel's language, when the notebook says

    @property
    def code_cells(self) -> list[Cell]:
        return [c for c in self.cells if c.is_code]

    def text_row(self, offset: int) -> int:
        """The 1-based line of the file's text at a character offset (for annotations on the raw file)."""
        return self.text.count("\n", 0, offset) + 1


def load_notebook(raw: bytes) -> Notebook:
    """Read a notebook's bytes; NotebookError says in one line why they are not a usable notebook."""
    bom = raw.startswith(BOM)
    try:
        text = raw[len(BOM):].decode("utf-8") if bom else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a notebook: not UTF-8 (byte {exc.start}); notebooks are UTF-8 JSON") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") \
            from None
    except RecursionError:
        raise NotebookError("not a notebook: JSON nested too deeply to read") from None
    minor, language = _validate(data)
    spans = _locate_sources(text)
    cells = []
    for index, cell in enumerate(data["cells"]):
        span, lines = spans[index]
        source = cell["source"]
        joined = "".join(source) if isinstance(source, list) else source
        located = "".join(line.value for line in lines) if lines is not None else _string_at(text, span)
        if located != joined:  # the scanner and the JSON parser must agree, or nothing is written
            raise NotebookError(f"cell {index + 1}: cannot locate its source in the file's text")
        cell_id = cell.get("id")
        if not isinstance(cell_id, str):
            metadata = cell.get("metadata")
            colab_id = metadata.get("id") if isinstance(metadata, dict) else None
            cell_id = colab_id if isinstance(colab_id, str) else None
        cells.append(Cell(index, cell["cell_type"], cell_id, joined, span, lines))
    return Notebook(raw, text, bom, tuple(cells), minor, language)


def _validate(data: Any) -> tuple[int, Optional[str]]:
    """The nbformat minor version and the kernel language; NotebookError for any other shape."""
    if not isinstance(data, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    major = data.get("nbformat")
    if major != 4 or isinstance(major, bool):
        if "worksheets" in data or major == 3:
            raise NotebookError("nbformat 3 notebook: gpulint reads nbformat 4; convert it with "
                                "`jupyter nbconvert --to notebook --nbformat 4`")
        raise NotebookError(f"not a notebook gpulint can read: nbformat is {major!r}, expected 4")
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("malformed notebook: no list of cells")
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"malformed notebook: cell {index} has no cell_type")
        source = cell.get("source")
        if not (isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)):
            raise NotebookError(f"malformed notebook: cell {index}'s source is not text")
    minor = data.get("nbformat_minor")
    metadata = data.get("metadata")
    language = None
    if isinstance(metadata, dict):
        for table, key in (("kernelspec", "language"), ("language_info", "name")):
            entry = metadata.get(table)
            if isinstance(entry, dict) and isinstance(entry.get(key), str):
                language = entry[key].lower()
                break
    return (minor if isinstance(minor, int) and not isinstance(minor, bool) else 0), language


def is_python(notebook: Notebook) -> bool:
    """A notebook that says nothing of its language is taken for Python (Jupyter's default)."""
    return notebook.language is None or notebook.language in PYTHON_LANGUAGES


# ---------------------------------------------------------------------------------------------
# where the sources are

def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]


def _expect(text: str, position: int, char: str) -> int:
    position = _skip(text, position)
    if text[position:position + 1] != char:
        raise NotebookError(f"cannot locate the cells in the file's text (expected {char!r} at {position})")
    return position + 1


def _members(text: str, position: int) -> Generator[tuple[str, int], int, int]:
    """The members of the object starting at `position`: yields (key, value start); the caller
    sends back the value's end."""
    position = _expect(text, position, "{")
    position = _skip(text, position)
    if text[position:position + 1] == "}":
        return position + 1
    while True:
        position = _expect(text, position, '"')
        key, position = scanstring(text, position)
        position = _skip(text, _expect(text, position, ":"))
        position = _skip(text, (yield key, position))
        if text[position:position + 1] == "}":
            return position + 1
        position = _expect(text, position, ",")


def _value_end(text: str, position: int) -> int:
    return _DECODER.raw_decode(text, position)[1]


def _walk_object(text: str, position: int, visit: Callable[[str, int], Optional[int]]) -> int:
    """Walk an object's members; `visit` returns a member's end when it read the value itself."""
    members = _members(text, position)
    seen: set[str] = set()
    try:
        key, start = next(members)
        while True:
            if key in seen and key in ("cells", "source"):
                raise NotebookError(f"malformed notebook: the key {key!r} appears twice in one object")
            seen.add(key)
            end = visit(key, start)
            key, start = members.send(end if end is not None else _value_end(text, start))
    except StopIteration as stop:
        return stop.value


def _locate_sources(text: str) -> list[tuple[tuple[int, int], Optional[tuple[SourceLine, ...]]]]:
    found: list[tuple[tuple[int, int], Optional[tuple[SourceLine, ...]]]] = []

    def cell_member(key: str, start: int) -> Optional[int]:
        if key != "source":
            return None
        if text[start] == '"':
            end = _value_end(text, start)
            found.append(((start, end), None))
            return end
        lines = []
        position = _skip(text, _expect(text, start, "["))
        if text[position:position + 1] != "]":
            while True:
                item = _skip(text, position)
                position = _expect(text, item, '"')
                value, position = scanstring(text, position)
                lines.append(SourceLine(value, item, position))
                position = _skip(text, position)
                if text[position:position + 1] == "]":
                    break
                position = _expect(text, position, ",")
        found.append(((start, position + 1), tuple(lines)))
        return position + 1

    def top_member(key: str, start: int) -> Optional[int]:
        if key != "cells":
            return None
        position = _skip(text, _expect(text, start, "["))
        if text[position:position + 1] == "]":
            return position + 1
        while True:
            position = _walk_object(text, position, cell_member)
            position = _skip(text, position)
            if text[position:position + 1] == "]":
                return position + 1
            position = _expect(text, position, ",")

    try:
        _walk_object(text, _skip(text, 0), top_member)
    except (ValueError, IndexError) as exc:  # JSONDecodeError is a ValueError
        raise NotebookError(f"cannot locate the cells in the file's text: {exc}") from None
    return found


def _string_at(text: str, span: tuple[int, int]) -> str:
    value, _ = scanstring(text, span[0] + 1)
    return value
