"""A finding as every output format sees it: plain data, picklable and cacheable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gpulint.engine.fixes import Applicability, Edit, Fix


@dataclass(frozen=True, order=True)
class Location:
    row: int
    column: int


@dataclass(frozen=True)
class FixEdit:
    """A text edit with the positions output formats print."""

    start: int
    end: int
    content: str
    location: Location
    end_location: Location

    def as_edit(self) -> Edit:
        return Edit(self.start, self.end, self.content)


@dataclass(frozen=True)
class FindingFix:
    applicability: Applicability
    message: str
    edits: tuple[FixEdit, ...]

    def as_fix(self) -> Fix:
        return Fix(self.applicability, self.message, tuple(e.as_edit() for e in self.edits))

    def is_applicable(self, unsafe: bool) -> bool:
        return self.applicability is Applicability.SAFE or unsafe


@dataclass(frozen=True)
class Finding:
    path: str
    code: str
    name: str
    message: str
    location: Location
    end_location: Location
    fix: Optional[FindingFix] = None
    url: Optional[str] = None
    # rows a suppression comment may sit on: the reported statement's lines
    noqa_rows: tuple[int, int] = (0, 0)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.location.row, self.location.column, self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the cache and for worker processes."""
        fix = None
        if self.fix is not None:
            fix = {
                "applicability": self.fix.applicability.value,
                "message": self.fix.message,
                "edits": [
                    [e.start, e.end, e.content, e.location.row, e.location.column, e.end_location.row, e.end_location.column]
                    for e in self.fix.edits
                ],
            }
        return {
            "path": self.path, "code": self.code, "name": self.name, "message": self.message,
            "location": [self.location.row, self.location.column],
            "end_location": [self.end_location.row, self.end_location.column],
            "fix": fix, "url": self.url, "noqa_rows": list(self.noqa_rows),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        fix = None
        if data.get("fix"):
            f = data["fix"]
            fix = FindingFix(
                Applicability(f["applicability"]),
                f["message"],
                tuple(FixEdit(s, e, c, Location(r1, c1), Location(r2, c2)) for s, e, c, r1, c1, r2, c2 in f["edits"]),
            )
        return cls(
            path=data["path"], code=data["code"], name=data["name"], message=data["message"],
            location=Location(*data["location"]), end_location=Location(*data["end_location"]),
            fix=fix, url=data.get("url"), noqa_rows=tuple(data.get("noqa_rows", (0, 0))),  # type: ignore[arg-type]
        )
