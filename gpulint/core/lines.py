"""Offsets in a text to 1-based rows and columns and back; no LibCST, so the language server's own
process (which only maps positions) can use it without loading the parser."""

from __future__ import annotations

import bisect
import re

_NEWLINE = re.compile(r"\r\n|\r|\n")
_TRIVIA = re.compile(r"(?:[ \t\f\r\n]+|\\\r?\n|#[^\r\n]*)*")


class LineIndex:
    """Offsets to 1-based (row, column) for one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def location(self, offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(self.starts, offset) - 1
        return row + 1, offset - self.starts[row] + 1

    def line_start(self, offset: int) -> int:
        return self.starts[bisect.bisect_right(self.starts, offset) - 1]

    def line_text(self, row: int) -> str:
        start = self.starts[row - 1]
        end = self.starts[row] if row < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def first_token(self, offset: int) -> int:
        """Skip whitespace, comments and line continuations from `offset`."""
        match = _TRIVIA.match(self.text, offset)
        return match.end() if match else offset

    def last_token_end(self, start: int, end: int) -> int:
        """End of the last non-whitespace character in text[start:end]."""
        while end > start and self.text[end - 1] in " \t\f\r\n":
            end -= 1
        return end
