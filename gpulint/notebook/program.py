"""A notebook's code cells as one program, and the way back from its positions to the cells.

The cells run in order in one kernel, so a DataLoader built in cell 3 and the loop in cell 7
are one training step: the rules see the code cells joined in order, each cell starting on a
line of its own after a blank line (a comment at the end of one cell never suppresses a
finding at the top of the next). A cell that does not parse on its own is reported and left
out, as Jupyter would fail to run it, so the other cells are still linted.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Mapping, Optional, Sequence

from gpulint.notebook.magics import CellCode, Piece, compiles, not_python, split_lines, transform
from gpulint.notebook.model import Cell, Notebook
from gpulint.records import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Placement:
    """Where one code cell's code lies in the program."""

    cell: Cell
    source: str  # the cell's current source
    code: CellCode
    start: int  # program offset of the cell's first character
    end: int  # program offset after its code; then an added newline (when it has none) and the separator
    stop: int
    # the cell's own line ending, for code written into it (and the lines added after it); a cell
    # of one line has none of its own and takes the notebook's
    newline: str = "\n"

    @property
    def added_newline(self) -> bool:
        return self.stop - self.end > len(self.newline)


def newline_of(source: str, default: str = "\n") -> str:
    match = _NEWLINE.search(source)
    return match.group() if match else default


@dataclass(frozen=True)
class CellProblem:
    """A code cell that is not linted because it does not parse."""

    cell: Cell
    source: str  # the source that does not parse
    message: str
    offset: int  # in `source`

    @property
    def location(self) -> tuple[int, int]:
        return row_column(self.source, self.offset)

    @property
    def holds(self) -> Optional[str]:
        """What the cell holds instead of Python ("YAML", "shell"; magics.not_python), or None."""
        return not_python(self.source)


@dataclass(frozen=True)
class CellEdit:
    """An edit of one cell's source (character offsets in that source)."""

    cell: Cell
    start: int
    end: int
    content: str


class Program:
    def __init__(self, text: str, placements: Sequence[Placement], problems: Sequence[CellProblem],
                 skipped: Sequence[tuple[Cell, str]]) -> None:
        self.text = text
        self.placements = list(placements)
        self.problems = list(problems)
        self.skipped = list(skipped)  # cells not linted by design (their cell magic is not Python)
        self._starts = [p.start for p in self.placements]
        self._rows = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    # --- positions ----------------------------------------------------------------------------
    def offset(self, row: int, column: int) -> int:
        """The program offset of a 1-based (row, column)."""
        row = min(max(row, 1), len(self._rows))
        return min(self._rows[row - 1] + column - 1, len(self.text))

    def placement_at(self, offset: int) -> Optional[Placement]:
        if not self.placements:
            return None
        index = max(0, bisect.bisect_right(self._starts, offset) - 1)
        return self.placements[index]

    def locate(self, offset: int, at_end: bool = False) -> tuple[Optional[Placement], int]:
        """The cell at a program offset and the offset in its source (a placeholder points at
        the start of the line it replaces; the added newline and separator at the cell's end)."""
        placement = self.placement_at(offset)
        if placement is None:
            return None, 0
        local = offset - placement.start
        if local >= len(placement.code.text):
            return placement, len(placement.source)
        piece = _piece_at(placement.code.pieces, local, at_end)
        if piece is None:
            return placement, 0
        if not piece.copied:
            return placement, piece.source_start
        return placement, piece.source_start + (local - piece.code_start)

    def _copied_offset(self, placement: Placement, local: int, at_end: bool) -> Optional[int]:
        piece = _piece_at(placement.code.pieces, local, at_end)
        if piece is None or not piece.copied:
            return None
        return piece.source_start + (local - piece.code_start)

    # --- edits ----------------------------------------------------------------------------------
    def map_edit(self, start: int, end: int, content: str) -> Optional[CellEdit]:
        """The program edit as an edit of one cell, or None when it touches text that is not the
        cell's own (a placeholder, the separator) or spans two cells."""
        placement = self.placement_at(start)
        if placement is None or start < placement.start:
            return None
        content = _NEWLINE.sub(lambda _: placement.newline, content)
        if start >= placement.end:  # an insertion after the cell's last line
            if start != end:
                return None
            if start == placement.end:
                return CellEdit(placement.cell, len(placement.source), len(placement.source), content)
            if placement.added_newline and start == placement.end + len(placement.newline):
                # the cell has no final newline: the inserted lines start with one instead
                text = placement.newline + content
                if text.endswith(placement.newline):
                    text = text[:-len(placement.newline)]
                return CellEdit(placement.cell, len(placement.source), len(placement.source), text)
            return None
        newline = placement.newline
        if placement.added_newline and end == placement.end + len(newline):
            # the edit ends with the line break gpulint added after the cell's last line: the
            # same edit without it (a deleted last line takes the line break before it along)
            mapped = self.map_edit(start, placement.end, content[:-len(newline)] if content.endswith(newline)
                                   else content)
            if mapped is not None and not mapped.content and placement.source[:mapped.start].endswith(newline):
                mapped = CellEdit(mapped.cell, mapped.start - len(newline), mapped.end, "")
            return mapped
        if end > placement.end:
            return None
        local_start, local_end = start - placement.start, end - placement.start
        source_start = self._copied_offset(placement, local_start, at_end=False)
        if source_start is None and start == end:  # an insertion right after copied text
            source_start = self._copied_offset(placement, local_start, at_end=True)
        source_end = source_start if start == end else self._copied_offset(placement, local_end, at_end=True)
        if source_start is None or source_end is None or source_end < source_start:
            return None
        if placement.source[source_start:source_end] != self.text[start:end]:
            return None  # the range holds a placeholder or skipped text
        return CellEdit(placement.cell, source_start, source_end, content)


def _piece_at(pieces: Sequence[Piece], local: int, at_end: bool) -> Optional[Piece]:
    """The piece holding code offset `local`: the one it starts in, or with `at_end` the one it ends."""
    for piece in pieces:
        if at_end:
            if piece.code_start < local <= piece.code_start + piece.length:
                return piece
        elif piece.code_start <= local < piece.code_start + piece.length:
            return piece
    return None


def build_program(notebook: Notebook, sources: Optional[Mapping[int, str]] = None) -> Program:
    """The program of the notebook's code cells; `sources` replaces cells' sources (by index)."""
    parts: list[str] = []
    length = 0
    placements: list[Placement] = []
    problems: list[CellProblem] = []
    skipped: list[tuple[Cell, str]] = []
    cells = notebook.code_cells
    # the notebook's line ending: the first one any code cell has (a notebook saved on Windows
    # has CRLF in every cell of more than one line)
    texts = [sources.get(cell.index, cell.source) if sources else cell.source for cell in cells]
    default = next((newline_of(t, "") for t in texts if newline_of(t, "")), "\n")
    for cell, source in zip(cells, texts):
        code = transform(source)
        if code.skipped is not None:
            skipped.append((cell, code.skipped))
            continue
        if not code.text.strip():
            continue
        problem = _syntax_problem(cell, source, code)
        if problem is not None:
            problems.append(problem)
            continue
        text = code.text
        end = length + len(text)
        newline = newline_of(source, default)  # a CRLF cell stays CRLF throughout, for the fixes' new lines too
        if not text.endswith(("\n", "\r")):
            text += newline
        text += newline
        placements.append(Placement(cell, source, code, length, end, length + len(text), newline))
        parts.append(text)
        length += len(text)
    return Program("".join(parts), placements, problems, skipped)


def _syntax_problem(cell: Cell, source: str, code: CellCode) -> Optional[CellProblem]:
    """Why the cell's code does not parse by itself, with the position in the cell."""
    if compiles(code.text):  # remembered: a plain cell's code is its source, which `transform` compiled
        return None
    try:
        compile(code.text, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        rows = [0]
        for line in split_lines(code.text):
            rows.append(rows[-1] + len(line))
        row = min(max(exc.lineno or 1, 1), len(rows))
        local = min(rows[row - 1] + max((exc.offset or 1) - 1, 0), len(code.text))
        piece = _piece_at(code.pieces, local, at_end=False)
        offset = piece.source_start + (local - piece.code_start if piece.copied else 0) if piece else len(source)
        message = f"SyntaxError: {exc.msg} (the cell was not linted; the other cells were)"
        return CellProblem(cell, source, message, offset)
    except (ValueError, RecursionError, MemoryError) as exc:
        return CellProblem(cell, source, f"cannot parse the cell ({type(exc).__name__}); it was not linted", 0)
    return None


def row_column(text: str, offset: int) -> tuple[int, int]:
    """1-based (row, column) of a character offset, lines ending at `\\r\\n`, `\\r` or `\\n`."""
    starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
    row = bisect.bisect_right(starts, offset) - 1
    return row + 1, offset - starts[row] + 1
