"""`--output-format gitlab`: a GitLab Code Quality report, for the merge request widget.

A JSON array of issues with the fields GitLab documents: `description`, `check_name`,
`fingerprint`, `severity` and `location` (`path` relative to the repository, no `./`, and
`lines.begin`/`lines.end`). Paths are relative to `CI_PROJECT_DIR` when GitLab sets it, else to
the working directory. A notebook's issue is on the .ipynb file's lines holding the code; the
description names the cell.

A fingerprint must stay the same while the finding does, so that GitLab can tell new findings
from fixed ones between two pipelines: it hashes the rule, the file, the message and the text of
the reported line (not its number, which moves when lines are added above), and counts repeats of
the same finding in a file so that each gets its own.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional, Sequence

from gpulint.core.findings import Finding
from gpulint.output.display import RenderContext, escape_surrogates
from gpulint.output.text import position

SEVERITIES = ("info", "minor", "major", "critical", "blocker")  # GitLab's scale, lowest first


def severity(finding: Finding) -> str:
    """A file gpulint could not check and a rule about wrong results are `major`; an unused
    suppression is `info`; a performance finding is `minor`."""
    from gpulint.rules import rule_by_code
    from gpulint.rules.gpu000_invalid_file import InvalidFile
    from gpulint.rules.gpu900_unused_suppression import UnusedSuppression

    if finding.code == InvalidFile.code:
        return "major"
    if finding.code == UnusedSuppression.code:
        return "info"

    rule = rule_by_code(finding.code)
    if rule is not None and rule.impact.startswith("correctness"):
        return "major"
    return "minor"


def report_path(path: str) -> str:
    base = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, base)
    except ValueError:  # pragma: no cover - another drive on Windows
        return absolute.replace(os.sep, "/")
    return (absolute if relative.startswith("..") else relative).replace(os.sep, "/")


def _line_text(finding: Finding, ctx: RenderContext) -> str:
    text = ctx.cell_text(finding.path, finding.cell.number if finding.cell is not None else None)
    lines = text.splitlines() if text else []
    row = finding.location.row
    return lines[row - 1].strip() if 0 < row <= len(lines) else ""


def render_gitlab(findings: Sequence[Finding], ctx: Optional[RenderContext] = None) -> str:
    ctx = ctx or RenderContext()
    issues = []
    repeats: dict[str, int] = {}
    for finding in findings:
        path = report_path(finding.path)
        key = "\0".join((finding.code, path, finding.message, _line_text(finding, ctx)))
        repeats[key] = repeats.get(key, 0) + 1
        fingerprint = hashlib.sha256(f"{key}\0{repeats[key]}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
        if finding.cell is not None:
            lines = {"begin": finding.cell.file_row, "end": finding.cell.file_end_row}
            description = f"{finding.code} {position(finding)}: {finding.message}"
        else:
            lines = {"begin": finding.location.row, "end": finding.end_location.row}
            description = f"{finding.code} {finding.message}"
        issues.append({
            "type": "issue",
            "description": description,
            "check_name": finding.code,
            "fingerprint": fingerprint,
            "severity": severity(finding),
            "location": {"path": path, "lines": lines},
        })
    return escape_surrogates(json.dumps(issues, indent=2, ensure_ascii=False)) + "\n"
