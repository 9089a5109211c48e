"""What renderers may need beyond the findings: file texts not on disk, fix display."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from gpulint.engine.source import SourceError, read_source


@dataclass
class RenderContext:
    # texts of linted files that are not on disk as linted (stdin); others are read when needed
    sources: dict[str, str] = field(default_factory=dict)
    show_fixes: bool = False

    def text_of(self, path: str) -> Optional[str]:
        if path not in self.sources:
            try:
                self.sources[path] = read_source(Path(path)).text
            except (SourceError, OSError, ValueError):
                return None
        return self.sources[path]


def display_path(path: str) -> str:
    """The path relative to the working directory when it lies below it (what CI tools expect)."""
    if path == "-" or not os.path.isabs(path):
        return path.replace(os.sep, "/")
    try:
        relative = os.path.relpath(path)
    except ValueError:  # pragma: no cover - other drive on Windows
        return path
    return path if relative.startswith("..") else relative.replace(os.sep, "/")
