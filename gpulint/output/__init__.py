"""Output formats. Each takes the findings of a run and returns the text to print."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from gpulint.engine.findings import Finding
from gpulint.output.context import RenderContext
from gpulint.output.full import render_full
from gpulint.output.github import render_github
from gpulint.output.json_format import render_json, render_json_lines
from gpulint.output.junit import render_junit
from gpulint.output.sarif import render_sarif
from gpulint.output.text import render_concise

# render(findings, ctx=None): ctx carries file texts not on disk (stdin) and display options
Renderer = Callable[[Sequence[Finding], Optional[RenderContext]], str]

FORMATS: dict[str, Renderer] = {
    "concise": render_concise,
    "full": render_full,
    "json": render_json,
    "json-lines": render_json_lines,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
}
HUMAN_FORMATS = frozenset({"concise", "full"})  # followed by the summary
