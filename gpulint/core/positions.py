"""Source positions for the few nodes that are reported, not for the whole tree.

LibCST's PositionProvider records a range for every node, which costs about twice the
parse. We only need ranges for reported nodes and fix anchors, so one code-generation
pass records just those and stops as soon as the last one has been emitted.

Code generation is supposed to give back the file's text exactly, but LibCST loses some
whitespace: a form feed at the start of a line (with the spaces around it) and a lone
carriage return at the end of the file. Offsets counted in the generated code are then
off by one after each of them, and a fix placed with them lands on the wrong bytes. So
the generated code is compared with the file: where they differ only by such whitespace,
offsets are mapped back onto the file; a span whose own code differs from the file's is
marked inexact, and no fix is built on it.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any, Iterable, Optional

import libcst as cst
from libcst._nodes.internal import CodegenState

from gpulint.records import dataclass


@dataclass(frozen=True)
class Span:
    start: int  # offset where the node's generated code begins (whitespace it owns included)
    end: int
    indent: tuple[str, ...]  # indentation in force when the node was generated
    exact: bool = True  # False: the file's text here is not what LibCST generates for the node
    generated_start: int = -1  # where the node is in the generated code, when that differs from the file
    generated_end: int = -1


# whitespace LibCST may drop from a file (form feeds, the spaces next to them, a final lone `\r`)
_DROPPABLE = frozenset(" \t\f\r\v")
_BLOCK = 4096
_NEWLINES = ("\n", "\r\n", "\r")


class _Done(Exception):
    pass


class SpanRecorder(CodegenState):
    """Code generation that records where the target nodes start and end (and their indentation);
    with `stop`, it stops as soon as the last one has been emitted."""

    def __init__(self, targets: set[int], stop: bool = True, **codegen: Any) -> None:
        super().__init__(**codegen)
        self.targets = targets
        self.stop = stop
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
            if self.stop and len(self.spans) == len(self.targets):
                raise _Done


class OffsetMap:
    """Offsets in LibCST's generated code as offsets in the file, where the two differ by
    whitespace LibCST dropped (`shifts`: generated offset, how many more characters the file
    has up to there)."""

    def __init__(self, generated: str, shifts: list[tuple[int, int]]) -> None:
        self.generated = generated
        self.shifts = shifts
        self._positions = [g for g, _ in shifts]

    def to_file(self, offset: int, at_end: bool) -> int:
        """A start lies after whitespace the generated code lacks there, an end before it."""
        index = (bisect.bisect_left if at_end else bisect.bisect_right)(self._positions, offset) - 1
        return offset + (self.shifts[index][1] if index >= 0 else 0)

    def dropped_inside(self, start: int, end: int) -> bool:
        """Whether the file has dropped whitespace strictly inside generated[start:end]."""
        index = bisect.bisect_right(self._positions, start)
        return index < len(self._positions) and self._positions[index] < end


class SpanTable(dict):
    """Spans by id(node); `offsets` is set when the generated code differs from the file."""

    offsets: Optional[OffsetMap] = None
    aligned: bool = True  # False: the difference is not whitespace; no offset can be trusted


def compute_spans(module: cst.Module, nodes: Iterable[cst.CSTNode], text: Optional[str] = None) -> SpanTable:
    """Spans keyed by id(node) for the given nodes of `module`, as offsets in `text` (the parsed file)."""
    table = SpanTable()
    targets = {id(n) for n in nodes}
    if not targets:
        return table
    state = SpanRecorder(targets, default_indent=module.default_indent, default_newline=module.default_newline)
    try:
        module._codegen(state)
    except _Done:
        pass
    table.update(state.spans)
    if text is None:
        return table
    generated = "".join(state.tokens)
    if text.startswith(generated) or (generated.startswith(text) and generated[len(text):] in _NEWLINES):
        return table  # the usual case: generated code and file agree (but for a final newline it lacks)
    shifts = _align(generated, text)
    if shifts is None:  # differences beyond whitespace: no span can be trusted for a fix
        table.aligned = False
        table.update({key: replace(span, exact=False) for key, span in state.spans.items()})
        return table
    offsets = OffsetMap(generated, shifts)
    table.offsets = offsets
    for key, span in state.spans.items():
        start, end = offsets.to_file(span.start, at_end=False), offsets.to_file(span.end, at_end=True)
        exact = not offsets.dropped_inside(span.start, span.end)
        table[key] = Span(start, end, span.indent, exact, span.start, span.end)
    return table


def _align(generated: str, text: str) -> Optional[list[tuple[int, int]]]:
    """Where `text` has whitespace that `generated` lacks: [(generated offset, text minus generated)].

    None when `generated` is not `text` with some droppable whitespace removed.
    """
    shifts: list[tuple[int, int]] = []
    i = j = 0
    while j < len(generated):
        while j < len(generated) and text[i:i + _BLOCK] == generated[j:j + _BLOCK]:
            i += _BLOCK
            j += _BLOCK
        while j < len(generated) and i < len(text) and text[i] == generated[j]:
            i += 1
            j += 1
        if j >= len(generated) or (i >= len(text) and generated[j:] in _NEWLINES):
            break  # (a file without a final newline: LibCST adds it, then takes it back)
        skipped = i
        while i < len(text) and text[i] in _DROPPABLE and text[i] != generated[j]:
            i += 1
        if i == skipped or i >= len(text):
            return None
        shifts.append((j, i - j))
    return shifts


