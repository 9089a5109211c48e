"""Output formats. Each takes the findings of a run and returns the text to print.

A format's module is imported only when it is used, so a run prints its report without
loading the other formats (SARIF imports the rules, for their docs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Optional, Sequence

if TYPE_CHECKING:  # the CLI reads FORMATS to start: nothing else is imported then
    from gpulint.core.findings import Finding
    from gpulint.output.display import RenderContext

# render(findings, ctx=None): ctx carries file texts not on disk (stdin) and display options
Renderer = Callable[[Sequence["Finding"], Optional["RenderContext"]], str]

# format name -> (module, function)
FORMATS: dict[str, tuple[str, str]] = {
    "concise": ("gpulint.output.text", "render_concise"),
    "full": ("gpulint.output.full", "render_full"),
    "json": ("gpulint.output.json_format", "render_json"),
    "json-lines": ("gpulint.output.json_format", "render_json_lines"),
    "github": ("gpulint.output.github", "render_github"),
    "gitlab": ("gpulint.output.gitlab", "render_gitlab"),
    "sarif": ("gpulint.output.sarif", "render_sarif"),
    "junit": ("gpulint.output.junit", "render_junit"),
}
HUMAN_FORMATS = frozenset({"concise", "full"})  # followed by the summary
# formats that show fixes' edits: `check` builds them (LibCST) only for these or with --show-fixes
EDIT_FORMATS = frozenset({"full", "json", "json-lines", "sarif"})


def renderer(name: str) -> Renderer:
    """The render function of the format `name` (one of FORMATS)."""
    module, function = FORMATS[name]
    render: Renderer = getattr(importlib.import_module(module), function)
    return render
