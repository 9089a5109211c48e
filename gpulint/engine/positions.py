"""Source positions for the few nodes that are reported, not for the whole tree.

LibCST's PositionProvider records a range for every node, which costs about twice the
parse. We only need ranges for reported nodes and fix anchors, so one code-generation
pass records just those and stops as soon as the last one has been emitted.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Iterable

import libcst as cst
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n|\r|\n")
_TRIVIA = re.compile(r"(?:[ \t\f\r\n]+|\\\r?\n|#[^\r\n]*)*")


@dataclass(frozen=True)
class Span:
    start: int  # offset where the node's generated code begins (whitespace it owns included)
    end: int
    indent: tuple[str, ...]  # indentation in force when the node was generated


class _Done(Exception):
    pass


class _SpanState(CodegenState):
    def __init__(self, module: cst.Module, targets: set[int]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.targets = targets
        self.offset = 0
        self.open: dict[int, tuple[int, tuple[str, ...]]] = {}
        self.spans: dict[int, Span] = {}

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.targets:
            self.open[key] = (self.offset, tuple(self.indent_tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.open:
            start, indent = self.open.pop(key)
            self.spans[key] = Span(start, self.offset, indent)
            if len(self.spans) == len(self.targets):
                raise _Done


def compute_spans(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, Span]:
    """Spans keyed by id(node) for the given nodes of `module`."""
    targets = {id(n) for n in nodes}
    if not targets:
        return {}
    state = _SpanState(module, targets)
    try:
        module._codegen(state)
    except _Done:
        pass
    return state.spans


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
