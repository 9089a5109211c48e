"""A finding as every output format sees it: plain data, picklable and cacheable."""

from __future__ import annotations

from typing import Any, Optional

from gpulint.core.edits import Applicability, Edit, Fix
from gpulint.records import dataclass


@dataclass(frozen=True, order=True)
class Location:
    row: int
    column: int


@dataclass(frozen=True)
class FixEdit(Edit):
    """A text edit with the positions output formats print."""

    location: Location
    end_location: Location
    cell: Optional[int] = None  # in a notebook: the cell edited (offsets and locations are that cell's)


@dataclass(frozen=True)
class CellRef:
    """Where a notebook finding is: the cell (1 = the notebook's first cell, markdown included),
    its id when the notebook has one, and the lines of the .ipynb file that hold the finding
    (for tools that show the raw file: GitHub annotations, SARIF). Location rows and columns
    are then counted in the cell's source."""

    number: int
    id: Optional[str] = None
    file_row: int = 1
    file_end_row: int = 1

    def to_list(self) -> list:
        return [self.number, self.id, self.file_row, self.file_end_row]

    @classmethod
    def from_list(cls, data: Any) -> "CellRef":
        number, cell_id, row, end_row = _typed(data, list)
        return cls(_natural(number, 1), None if cell_id is None else _typed(cell_id, str), _natural(row, 1),
                   _natural(end_row, 1))


@dataclass(frozen=True)
class Finding:
    path: str
    code: str
    name: str
    message: str
    location: Location
    end_location: Location
    fix: Optional[Fix[FixEdit]] = None
    # rows a suppression comment may sit on: the reported statement's lines
    noqa_rows: tuple[int, int] = (0, 0)
    cell: Optional[CellRef] = None  # a notebook's cell; rows and columns are then the cell's
    # what the one-line message leaves out: why no fix is offered, or what else to change by hand
    # (`--show-fixes`, `--output-format full`, JSON `note`)
    note: str = ""

    @property
    def sort_key(self) -> tuple:
        cell = self.cell.number if self.cell is not None else 0
        return (self.path, cell, self.location.row, self.location.column, self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the cache and for worker processes."""
        fix = None
        if self.fix is not None:
            fix = {
                "applicability": self.fix.applicability.value,
                "message": self.fix.message,
                "edits": [
                    [e.start, e.end, e.content, e.location.row, e.location.column, e.end_location.row,
                     e.end_location.column] + ([e.cell] if e.cell is not None else [])
                    for e in self.fix.edits
                ],
            }
        return {
            "path": self.path, "code": self.code, "name": self.name, "message": self.message,
            "location": [self.location.row, self.location.column],
            "end_location": [self.end_location.row, self.end_location.column],
            "fix": fix, "noqa_rows": list(self.noqa_rows),
            "cell": self.cell.to_list() if self.cell is not None else None,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        """The inverse of `to_dict`. Data of any other shape raises TypeError or ValueError (a
        cache entry that raises is a miss): a wrong type must never reach the output code."""
        fix = None
        if data.get("fix") is not None:
            f = _typed(data["fix"], dict)
            edits = []
            for edit in _typed(f["edits"], list):
                start, end, content, r1, c1, r2, c2, *cell = _typed(edit, list)
                if not _natural(start) <= _natural(end):
                    raise ValueError("edit ends before it starts")
                if len(cell) > 1:
                    raise ValueError("an edit has too many fields")
                edits.append(FixEdit(start, end, _typed(content, str), _location([r1, c1]), _location([r2, c2]),
                                     _natural(cell[0], 1) if cell else None))
            fix = Fix(Applicability(f["applicability"]), _typed(f["message"], str), tuple(edits))
        first, last = _typed(data.get("noqa_rows", [0, 0]), list)
        return cls(
            path=_typed(data["path"], str), code=_typed(data["code"], str), name=_typed(data["name"], str),
            message=_typed(data["message"], str), location=_location(data["location"]),
            end_location=_location(data["end_location"]), fix=fix,
            noqa_rows=(_natural(first, 0), _natural(last, 0)),
            cell=CellRef.from_list(data["cell"]) if data.get("cell") is not None else None,
            note=_typed(data.get("note") or "", str),
        )


def _typed(value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _natural(value: Any, least: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value < 2 ** 63:
        raise ValueError(f"expected an integer >= {least}, got {value!r}")
    return value


def _location(value: Any) -> Location:
    row, column = _typed(value, list)
    return Location(_natural(row, 1), _natural(column, 1))
