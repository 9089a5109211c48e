"""Findings as LSP diagnostics and ranges (plain dicts), in the position encoding the editor negotiated.

The two rule codes that change how a diagnostic looks are read from the registry's module names, not
from the rule classes: importing a rule loads the rule base and the project facts, which the server's
process would otherwise pay for before its first publish (tests/server/test_protocol.py checks them).
"""

from __future__ import annotations

from typing import Any, Optional

from gpulint.core.docs_url import rule_url
from gpulint.core.findings import Finding
from gpulint.rules import rule_modules
from gpulint.server.analysis import Positions


def _code_of(module: str) -> str:
    """The code of the rule in `module` (the registry reads it from the module's name: nothing imported)."""
    return next(rule.code for rule in rule_modules() if rule.module.rpartition(".")[2] == module)


INVALID_FILE = _code_of("gpu000_invalid_file")  # an error, not a warning
UNUSED_SUPPRESSION = _code_of("gpu900_unused_suppression")  # shown faded (unnecessary)
ERROR, WARNING = 1, 2  # DiagnosticSeverity
UNNECESSARY = 1  # DiagnosticTag


def lsp_position(positions: Positions, offset: int) -> dict[str, int]:
    line, character = positions.position(offset)
    return {"line": line, "character": character}


def lsp_range(positions: Positions, start: int, end: int) -> dict[str, Any]:
    return {"start": lsp_position(positions, start), "end": lsp_position(positions, end)}


def finding_range(positions: Positions, finding: Finding) -> tuple[int, int]:
    start = positions.location_offset(finding.location.row, finding.location.column)
    return start, positions.location_offset(finding.end_location.row, finding.end_location.column)


def diagnostic(finding: Finding, positions: Positions, site: Optional[str]) -> dict[str, Any]:
    """The finding as a diagnostic; it links to the rule's page only when a docs site is named."""
    start, end = finding_range(positions, finding)
    shown: dict[str, Any] = {
        "range": lsp_range(positions, start, end), "message": finding.message,
        "severity": ERROR if finding.code == INVALID_FILE else WARNING, "code": finding.code, "source": "gpulint",
    }
    url = rule_url(finding.code, site)
    if url:
        shown["codeDescription"] = {"href": url}
    if finding.code == UNUSED_SUPPRESSION:
        shown["tags"] = [UNNECESSARY]
    return shown
