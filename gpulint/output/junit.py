"""`--output-format junit`: one test suite per file, one failing test case per finding.

GitLab and Jenkins show JUnit reports natively; a run without findings is one passing case.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from itertools import groupby
from typing import Optional, Sequence

from gpulint.core.findings import Finding
from gpulint.output.display import RenderContext, display_path
from gpulint.output.text import position

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(value: str) -> str:
    """XML 1.0 cannot hold control characters even escaped; replace them."""
    return _XML_INVALID.sub("\ufffd", value)


def render_junit(findings: Sequence[Finding], ctx: Optional[RenderContext] = None) -> str:
    total = str(max(1, len(findings)))
    root = ET.Element("testsuites", name="gpulint", tests=total, failures=str(len(findings)), errors="0")
    if not findings:
        suite = ET.SubElement(root, "testsuite", name="gpulint", tests="1", failures="0", errors="0", skipped="0")
        ET.SubElement(suite, "testcase", name="no findings", classname="gpulint")
    for path, group in groupby(findings, key=lambda f: f.path):
        items = list(group)
        shown = _clean(display_path(path))
        suite = ET.SubElement(root, "testsuite", name=shown, tests=str(len(items)), failures=str(len(items)),
                              errors="0", skipped="0")
        for finding in items:
            where = position(finding)
            line = finding.cell.file_row if finding.cell is not None else finding.location.row
            case = ET.SubElement(suite, "testcase", name=f"{finding.code} {where}", classname=shown,
                                 file=shown, line=str(line))
            failure = ET.SubElement(case, "failure", message=_clean(f"{finding.code} {finding.message}"),
                                    type=finding.code)
            failure.text = _clean(f"{shown}:{where}: {finding.code} {finding.message}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
