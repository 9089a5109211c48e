"""JSON in ruff's schema, so tools that read ruff's output read ours."""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence

from gpulint.core.docs_url import rule_url
from gpulint.core.findings import Finding, FixEdit, Location
from gpulint.output.display import escape_surrogates


def _location(loc: Location) -> dict[str, int]:
    return {"column": loc.column, "row": loc.row}


def _edit(edit: FixEdit) -> dict[str, Any]:
    out: dict[str, Any] = {"content": edit.content, "end_location": _location(edit.end_location),
                           "location": _location(edit.location)}
    if edit.cell is not None:  # a notebook's fix may edit another cell than the finding's (an import)
        out["cell"] = edit.cell
    return out


def _site(ctx: object) -> Optional[str]:
    return getattr(ctx, "docs_site", None)


def finding_json(finding: Finding, site: Optional[str] = None) -> dict[str, Any]:
    """One finding; `url` is its rule's page on the docs site, null when no site is named (as ruff's
    is for a rule without docs)."""
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability.value,
            "message": finding.fix.message,
            "edits": [_edit(e) for e in finding.fix.edits],
        }
    cell = finding.cell
    extra = {"cell_id": cell.id} if cell is not None else {}  # notebooks only: ruff's schema for .py files
    return {
        "cell": cell.number if cell is not None else None,
        **extra,
        "code": finding.code,
        "end_location": _location(finding.end_location),
        "filename": os.path.abspath(finding.path) if finding.path != "-" else finding.path,
        "fix": fix,
        "location": _location(finding.location),
        "message": finding.message,
        "noqa_row": finding.location.row,
        "note": finding.note or None,  # why no fix is offered, or what else to change (not in ruff's schema)
        "url": rule_url(finding.code, site),
    }


def render_json(findings: Sequence[Finding], ctx: object = None) -> str:
    site = _site(ctx)
    return escape_surrogates(json.dumps([finding_json(f, site) for f in findings], indent=2, ensure_ascii=False)) + "\n"


def render_json_lines(findings: Sequence[Finding], ctx: object = None) -> str:
    site = _site(ctx)
    return "".join(escape_surrogates(json.dumps(finding_json(f, site), ensure_ascii=False)) + "\n" for f in findings)
