"""What renderers may need beyond the findings: file texts not on disk, fix display."""

from __future__ import annotations

import os
import re
from dataclasses import field
from pathlib import Path
from typing import Optional

from gpulint.core.source import SourceError, read_source
from gpulint.records import dataclass


@dataclass
class RenderContext:
    # texts of linted files that are not on disk as linted (stdin); others are read when needed
    sources: dict[str, str] = field(default_factory=dict)
    show_fixes: bool = False
    docs_site: Optional[str] = None  # where rule links point; None: no links (gpulint/core/docs_url.py)
    unsafe_fixes: bool = False  # `[*]` marks unsafe fixes too (--unsafe-fixes), as ruff marks them

    def text_of(self, path: str) -> Optional[str]:
        if path not in self.sources:
            try:
                self.sources[path] = read_source(Path(path)).text
            except (SourceError, OSError, ValueError):
                return None
        return self.sources[path]

    def cell_text(self, path: str, number: Optional[int]) -> Optional[str]:
        """The source of a notebook's cell `number` (1-based), or the file's text when None."""
        text = self.text_of(path)
        if number is None or text is None:
            return text
        from gpulint.notebook.model import NotebookError, load_notebook

        try:
            cells = load_notebook(text.encode("utf-8")).cells
        except NotebookError:
            return None
        return cells[number - 1].source if 0 < number <= len(cells) else None


def display_path(path: str, quote: bool = True) -> str:
    """The path relative to the working directory when it lies below it (what CI tools expect),
    quoted when it holds bytes that are not text (see `quote_path`) unless `quote` is False."""
    if path == "-" or not os.path.isabs(path):
        shown = path.replace(os.sep, "/")
    else:
        try:
            relative = os.path.relpath(path)
        except ValueError:  # pragma: no cover - other drive on Windows
            relative = ".."
        shown = path if relative.startswith("..") else relative.replace(os.sep, "/")
    return quote_path(shown) if quote else shown


_NEEDS_QUOTES = re.compile('["\\\x00-\x1f\x7f\udc80-\udcff]')
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
          '"': '\\"', "\\": "\\\\"}
_SURROGATES = re.compile("[\ud800-\udfff]")


def quote_path(path: str) -> str:
    """A file name as text that can be printed and read back byte for byte, the way git quotes
    names: as it is when it is plain text, else in double quotes with C escapes, a byte that
    is not UTF-8 (which Python holds as a lone surrogate) as octal: `"caf\\351.py"`."""
    if not _NEEDS_QUOTES.search(path):
        return path
    out = []
    for char in path:
        if char in _NAMED:
            out.append(_NAMED[char])
        elif "\udc80" <= char <= "\udcff":
            out.append(f"\\{ord(char) - 0xdc00:03o}")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def escape_surrogates(text: str) -> str:
    """JSON text with any lone surrogate (a file name's undecodable byte) written as a \\u escape,
    so the output is valid UTF-8 and `json.loads` gives back the exact name."""
    return _SURROGATES.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def printable(text: str) -> str:
    """Any text for a terminal or a log: undecodable bytes of file names as \\xNN."""
    return _SURROGATES.sub(lambda m: f"\\x{ord(m.group()) - 0xdc00:02x}" if ord(m.group()) >= 0xdc80
                           else f"\\u{ord(m.group()):04x}", text)
