"""`--output-format sarif`: SARIF 2.1.0 for GitHub code scanning, with every rule's docs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import quote

from gpulint import __version__
from gpulint.core.findings import Finding, Location
from gpulint.output.display import RenderContext, escape_surrogates
from gpulint.output.text import position

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def artifact_uri(path: str) -> str:
    """A relative or file:// URI; the name's bytes are percent-encoded, so a name that is not
    UTF-8 comes back exactly (`unquote_to_bytes`)."""
    shown = path
    if os.path.isabs(path):
        try:
            relative = os.path.relpath(path)
        except ValueError:  # pragma: no cover - other drive on Windows
            relative = ".."
        if relative.startswith(".."):
            return Path(path).as_uri()
        shown = relative
    return quote(os.fsencode(shown.replace(os.sep, "/")))


def _region(start: Location, end: Location) -> dict[str, int]:
    return {"startLine": start.row, "startColumn": start.column, "endLine": end.row, "endColumn": end.column}


def rule_descriptor(rule: Any, site: Optional[str] = None) -> dict[str, Any]:
    """The rule's SARIF descriptor; `helpUri` only when a docs site is named (never a dead link)."""
    from gpulint.output.docs import rule_markdown
    from gpulint.rules.gpu000_invalid_file import InvalidFile

    markdown = rule_markdown(rule, site)
    descriptor: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.docs.section("what")},
        "help": {"text": markdown, "markdown": markdown},
        "defaultConfiguration": {"level": "error", "enabled": not rule.preview and not rule.opt_in},
        "properties": {"tags": ["performance", "pytorch"] if rule is not InvalidFile else ["correctness"],
                       "fix": rule.fix.value if rule.fix is not None else "none"},
    }
    url = rule.url(site)
    if url is not None:
        descriptor["helpUri"] = url
    return descriptor


def _location(finding: Finding, uri: str) -> dict[str, Any]:
    cell = finding.cell
    if cell is None:
        return {"physicalLocation": {"artifactLocation": {"uri": uri},
                                     "region": _region(finding.location, finding.end_location)}}
    # a notebook: the region is the .ipynb file's lines that hold the code; the cell and the
    # position in its source are properties (SARIF has no notion of cells)
    return {
        "physicalLocation": {"artifactLocation": {"uri": uri},
                             "region": {"startLine": cell.file_row, "endLine": cell.file_end_row}},
        "properties": {"cell": cell.number, "cellId": cell.id,
                       "cellRegion": _region(finding.location, finding.end_location)},
    }


def _result(finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    uri = artifact_uri(finding.path)
    message = finding.message
    if finding.cell is not None:
        message = f"{position(finding)}: {message}"
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": "error",
        "message": {"text": message},
        "locations": [_location(finding, uri)],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.fix is not None and finding.cell is None:  # a notebook's edits are in cell coordinates
        result["fixes"] = [{
            "description": {"text": f"{finding.fix.message} ({finding.fix.applicability.value} fix)"},
            "artifactChanges": [{
                "artifactLocation": {"uri": uri},
                "replacements": [
                    {"deletedRegion": _region(e.location, e.end_location), "insertedContent": {"text": e.content}}
                    for e in finding.fix.edits
                ],
            }],
        }]
    return result


def sarif_log(findings: Sequence[Finding], site: Optional[str] = None) -> dict[str, Any]:
    from gpulint.rules import all_rules

    rules = all_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    driver: dict[str, Any] = {"name": "gpulint", "version": __version__, "semanticVersion": __version__}
    if site is not None:
        driver["informationUri"] = site
    driver["rules"] = [rule_descriptor(r, site) for r in rules]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            # our columns count code points, not SARIF's default UTF-16 code units
            "columnKind": "unicodeCodePoints",
            "results": [_result(f, index) for f in findings],
        }],
    }


def render_sarif(findings: Sequence[Finding], ctx: Optional[RenderContext] = None) -> str:
    log = sarif_log(findings, ctx.docs_site if ctx else None)
    return escape_surrogates(json.dumps(log, indent=2, ensure_ascii=False)) + "\n"
