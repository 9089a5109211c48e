"""`--output-format github`: workflow commands that GitHub shows as annotations on the diff."""

from __future__ import annotations

from typing import Optional, Sequence

from gpulint.core.findings import Finding
from gpulint.output.display import RenderContext, display_path, quote_path
from gpulint.output.text import position


def escape_data(value: str) -> str:
    """The message part of a workflow command (after `::`)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A `key=value` property: `,` and `:` would end it early."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _file(path: str) -> str:
    shown = display_path(path, quote=False)
    return quote_path(shown) if any("\udc80" <= c <= "\udcff" for c in shown) else shown


def annotation(finding: Finding) -> str:
    props = {
        "title": f"gpulint ({finding.code})",
        # GitHub's own escaping carries any text; only bytes that are not UTF-8 need quoting
        "file": _file(finding.path),
        "line": str(finding.location.row),
        "col": str(finding.location.column),
        "endLine": str(finding.end_location.row),
        "endColumn": str(finding.end_location.column),
    }
    message = f"{finding.code} {finding.message}"
    if finding.cell is not None:  # the annotation goes on the .ipynb file's own lines; the text names the cell
        props.update(line=str(finding.cell.file_row), endLine=str(finding.cell.file_end_row))
        del props["col"], props["endColumn"]
        message = f"{finding.code} {position(finding)}: {finding.message}"
    joined = ",".join(f"{key}={escape_property(value)}" for key, value in props.items())
    return f"::error {joined}::{escape_data(message)}"


def render_github(findings: Sequence[Finding], ctx: Optional[RenderContext] = None) -> str:
    return "".join(annotation(f) + "\n" for f in findings)
