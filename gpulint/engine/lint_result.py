"""What linting one file gives, shared by the `ast` pass (engine/linter.py) and the LibCST pass
(engine/libcst_pass.py), so that neither imports the other's tree library for it."""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING

from gpulint.analysis.ast_context import NO_LIBCST_NOTE
from gpulint.core.findings import Finding, Location
from gpulint.records import dataclass
from gpulint.rules.base import Rule
from gpulint.rules.gpu000_invalid_file import InvalidFile

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext, Detection

__all__ = ["NO_LIBCST_NOTE", "AstRun", "InternalError", "LintResult", "syntax_finding", "without_fixes"]


class InternalError(Exception):
    """A bug in gpulint itself while linting a file (never the user's fault)."""

    def __init__(self, path: str, detail: str, trace: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail
        self.trace = trace


def syntax_finding(path: str, message: str, row: int = 1, column: int = 1) -> Finding:
    return Finding(
        path=path, code=InvalidFile.code, name=InvalidFile.name, message=message,
        location=Location(row, column), end_location=Location(row, column),
        noqa_rows=(row, row),
    )


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    parsed: bool = True


@dataclass
class AstRun:
    """What the rules on `ast` reported in one file: detections and their findings, index by index."""

    ctx: "AstContext"
    rules: dict[str, Rule]
    detections: list["Detection"]
    findings: list[Finding]


def without_fixes(findings: list[Finding], note: str) -> list[Finding]:
    return [replace(f, fix=None, note=f"{note}; {f.note}" if f.note else note) if f.fix is not None else f
            for f in findings]
