"""Findings as LSP diagnostics and ranges, in the position encoding the editor negotiated."""

from __future__ import annotations

from typing import Optional

from lsprotocol import types

from gpulint.core.docs_url import rule_url
from gpulint.core.findings import Finding
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.rules.gpu900_unused_suppression import UnusedSuppression
from gpulint.server.analysis import Positions


def lsp_range(positions: Positions, start: int, end: int) -> types.Range:
    return types.Range(types.Position(*positions.position(start)), types.Position(*positions.position(end)))


def finding_range(positions: Positions, finding: Finding) -> tuple[int, int]:
    start = positions.location_offset(finding.location.row, finding.location.column)
    return start, positions.location_offset(finding.end_location.row, finding.end_location.column)


def diagnostic(finding: Finding, positions: Positions, site: Optional[str]) -> types.Diagnostic:
    """The finding as a diagnostic; it links to the rule's page only when a docs site is named."""
    start, end = finding_range(positions, finding)
    severity = types.DiagnosticSeverity.Error if finding.code == InvalidFile.code else types.DiagnosticSeverity.Warning
    url = rule_url(finding.code, site)
    return types.Diagnostic(
        range=lsp_range(positions, start, end), message=finding.message, severity=severity, code=finding.code,
        source="gpulint",
        code_description=types.CodeDescription(href=url) if url else None,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == UnusedSuppression.code else None,
    )
