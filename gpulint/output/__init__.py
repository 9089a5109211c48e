"""Output formats. Each takes the findings of a run and returns the text to print."""

from __future__ import annotations

from typing import Callable, Sequence

from gpulint.engine.findings import Finding
from gpulint.output.json_format import render_json, render_json_lines
from gpulint.output.text import render_concise

Renderer = Callable[[Sequence[Finding]], str]

FORMATS: dict[str, Renderer] = {
    "concise": render_concise,
    "json": render_json,
    "json-lines": render_json_lines,
}
