"""Keep a fix's code within the project's line length, laid out the way the file lays out code.

The engine renders each replacement where it goes (after the text its first line starts with,
before the text its last line ends with). A line the fix made longer than the line length is
broken: a one-line call, dict, list or set is split after its opening bracket (black's hanging
style: the elements on one indented line, else one a line with a trailing comma) or, in a file
that aligns continuation lines under the bracket, at the last comma that fits; a call already
spread over lines is broken the way it already breaks; `a if c else b` on the right of an
assignment is put in parentheses, one part a line; a comment line the fix indented is re-flowed.
Lines that were too long before the fix are left as they are.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence, Union

import libcst as cst

from gpulint.core.positions import SpanRecorder
from gpulint.core.style import CodeStyle
from gpulint.records import dataclass

Bracketed = Union[cst.Call, cst.Dict, cst.List, cst.Set, cst.FunctionDef, cst.Parameters]
_BRACKETED = (cst.Call, cst.Dict, cst.List, cst.Set, cst.FunctionDef, cst.Parameters)
_PRAGMA = re.compile(r"\s*#\s*(noqa|type:|pyright:|pylint:|mypy:|ruff:|isort:|fmt:)[^#]*$")
MAX_ROUNDS = 24


def visible_length(line: str) -> int:
    """The length ruff's E501 measures: without a trailing pragma comment (`# noqa`, `# type: ...`)."""
    return len(_PRAGMA.sub("", line).expandtabs(4))  # ruff counts a tab as indent-width (4) columns


def long_lines(text: str, width: int) -> set[str]:
    """The stripped lines of `text` that are longer than `width`."""
    return {line.strip() for line in text.splitlines() if visible_length(line) > width}


def _nodes(new: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
    """Every node of interest in `new`, outermost first."""
    found: list[cst.CSTNode] = []

    def collect(node: cst.CSTNode) -> None:
        if isinstance(node, cst.FunctionDef) and _plain_parameters(node.params):
            found.append(node)
            found.append(node.params)  # the def's span is its whole body: its parameters' span stands for it
        elif isinstance(node, cst.Parameters) and _plain_parameters(node) and node is new_roots.get(id(node)):
            found.append(node)  # a replacement of a def's parameters alone
        elif isinstance(node, (*_BRACKETED[:4], cst.IfExp, cst.BooleanOperation, cst.EmptyLine, cst.Arg,
                               cst.BaseDictElement, cst.BaseElement, cst.Param)):
            found.append(node)
        for child in node.children:
            collect(child)

    new_roots = {id(node): node for node in new}
    for node in new:
        collect(node)
    return found


@dataclass(frozen=True)
class Rendering:
    text: str
    spans: dict[int, tuple[int, int]]


def render(new: Sequence[cst.CSTNode], indent: Sequence[str], unit: str, newline: str,
           targets: Sequence[cst.CSTNode] = ()) -> Rendering:
    state = SpanRecorder({id(n) for n in targets}, stop=False, default_indent=unit, default_newline=newline,
                         indent_tokens=list(indent))
    for node in new:
        node._codegen(state)
    return Rendering("".join(state.tokens), {key: (span.start, span.end) for key, span in state.spans.items()})


@dataclass(frozen=True)
class Frame:
    """Where a replacement sits: the text before it on its first line and after it on its last."""

    prefix: str
    suffix: str
    indent: tuple[str, ...]
    newline: str


def fit(new: Sequence[cst.CSTNode], frame: Frame, style: CodeStyle, old_long: set[str]) -> list[cst.CSTNode]:
    """`new` with the lines it makes too long broken, in the file's style (see the module docstring)."""
    nodes = list(new)
    accepted = set(old_long)  # lines left long: there before, or nothing in them can be broken
    for _ in range(MAX_ROUNDS):
        targets = _nodes(nodes)
        rendering = render(nodes, frame.indent, style.unit, frame.newline, targets)
        full = frame.prefix + rendering.text + frame.suffix
        shift = len(frame.prefix)
        line = _first_new_long_line(full, style.width, accepted)
        if line is None:
            return nodes
        start, end = line
        changed = _fix_line(nodes, targets, rendering, shift, full, start, end, style)
        if changed is None:
            accepted.add(full[start:end].strip())  # a long string, a long name: leave it, go on
            continue
        nodes = changed
    return nodes


def _first_new_long_line(full: str, width: int, old_long: set[str]) -> Optional[tuple[int, int]]:
    offset = 0
    for line in full.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if visible_length(body) > width and body.strip() not in old_long:
            return offset, offset + len(body)
        offset += len(line)
    return None


def _line_indent(full: str, offset: int) -> str:
    """The indentation of the line holding `offset`, as Python counts it: what follows a form feed."""
    start = _line_start(full, offset)
    line = full[start:]
    indent = line[:len(line) - len(line.lstrip(" \t\f"))]
    return indent[indent.rfind("\f") + 1:]


def _multiline(text: str) -> bool:
    return "\n" in text or "\r" in text


def _line_start(full: str, offset: int) -> int:
    return max(full.rfind("\n", 0, offset), full.rfind("\r", 0, offset)) + 1


def _column(full: str, offset: int) -> int:
    """The column of `offset` as Python counts it: a form feed takes no room."""
    start = _line_start(full, offset)
    line = full[start:offset]
    lead = line[:len(line) - len(line.lstrip(" \t\f"))]
    return len(line) - (lead.rfind("\f") + 1)  # a form feed in the indentation resets the column


def _fix_line(nodes: list[cst.CSTNode], targets: list[cst.CSTNode], rendering: Rendering, shift: int, full: str,
              start: int, end: int, style: CodeStyle) -> Optional[list[cst.CSTNode]]:
    def span(node: cst.CSTNode) -> Optional[tuple[int, int]]:
        if isinstance(node, cst.FunctionDef):
            node = node.params
        found = rendering.spans.get(id(node))
        return None if found is None else (found[0] + shift, found[1] + shift)

    # a comment line the fix indented past the limit: re-flow it
    for node in targets:
        where = span(node)
        if isinstance(node, cst.EmptyLine) and where is not None and where[0] <= start < where[1] \
                and node.comment is not None:
            return _replace(nodes, node, _reflowed(node, style.width - len(_line_indent(full, start))))
    on_line = []
    for node in targets:
        where = span(node)
        if where is None or not isinstance(node, (*_BRACKETED, cst.IfExp, cst.BooleanOperation)) \
                or where[1] < start or where[0] > end:
            continue
        on_line.append((node, where))
    # `a and b` in the test of a `x if test else y` already one part a line: break before the operator
    wrapped = [(n, w) for n, w in on_line if isinstance(n, cst.IfExp) and _multiline(full[w[0]:w[1]])]
    for node, (a, b) in on_line:
        if isinstance(node, cst.BooleanOperation) and not _multiline(full[a:b]) and not node.lpar and any(
                w[0] < a and b < w[1] and (n.test is node) for n, w in wrapped):
            return _replace(nodes, node, node.with_changes(operator=node.operator.with_changes(
                whitespace_before=_break(_line_indent(full, a)))))
    # a bracket already spread over lines whose elements share this line: break where it already breaks
    for node, (a, b) in reversed(on_line):
        if isinstance(node, _BRACKETED) and _multiline(full[a:b]) and _elements(node):
            broken = _break_more(node, span, full, start, end, style)
            if broken is not None and not broken.deep_equals(node):
                return _replace(nodes, node, broken)
    # the outermost one-line bracket (or `a if c else b`) that runs past the limit, split; else the
    # outermost one at all (`f(x).attr.call()` or a trailing comment past the limit: black's split too)
    for past_limit in (True, False):
        for node, (a, b) in on_line:
            closing = 2 if isinstance(node, (cst.FunctionDef, cst.Parameters)) else 0  # `):` after parameters
            if _multiline(full[a:b]) or (past_limit and _column(full, b) + closing <= style.width):
                continue
            if isinstance(node, cst.IfExp):
                return _replace(nodes, node, _wrapped_ifexp(node, _line_indent(full, a), style,
                                                            _inside_brackets(full, a)))
            if isinstance(node, _BRACKETED) and _elements(node):
                split = _split(node, _line_indent(full, a), style, _column(full, _open_offset(node, a)))
                if not split.deep_equals(node):
                    return _replace(nodes, node, split)
    return None


def _code(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Param):  # a parameter renders only inside its list
        return cst.Module([]).code_for_node(cst.Parameters(params=[node]))
    return cst.Module([]).code_for_node(node)


def _open_offset(node: Bracketed, start: int) -> int:
    """The offset of a one-line node's opening bracket, from where its code starts."""
    if isinstance(node, cst.FunctionDef):
        return start - 1 - len(_code(node.whitespace_before_params))  # `start` is where its parameters begin
    if isinstance(node, cst.Parameters):
        return start - 1
    offset = start + sum(len(_code(p)) for p in node.lpar)
    if isinstance(node, cst.Call):
        offset += len(_code(node.func)) + len(_code(node.whitespace_after_func))
    return offset


class _Swap(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: Union[cst.CSTNode, cst.FlattenSentinel]) -> None:
        self.old = old
        self.new = new

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode,  # type: ignore[override]
                 ) -> Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]:
        if original_node is self.old:
            return self.new
        return updated_node


def _replace(nodes: list[cst.CSTNode], old: cst.CSTNode,
             new: Union[cst.CSTNode, cst.FlattenSentinel]) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for node in nodes:
        if node is old:
            out.extend(new.nodes if isinstance(new, cst.FlattenSentinel) else [new])
            continue
        result = node.visit(_Swap(old, new))
        assert isinstance(result, cst.CSTNode)
        out.append(result)
    return out


# -- elements of a bracketed node, and the whitespace around them ------------------------------
Element = Union[cst.Arg, cst.BaseDictElement, cst.BaseElement, cst.Param]


def _plain_parameters(params: cst.Parameters) -> bool:
    """Parameters that are all plain ones (no `/`, `*`, `*args` or `**kwargs`), which the layout can move."""
    return bool(params.params) and not params.posonly_params and not params.kwonly_params \
        and params.star_arg is cst.MaybeSentinel.DEFAULT and params.star_kwarg is None \
        and isinstance(params.posonly_ind, cst.MaybeSentinel)


def _elements(node: Bracketed) -> Sequence[Element]:
    if isinstance(node, cst.FunctionDef):
        return node.params.params
    if isinstance(node, cst.Parameters):
        return node.params
    return node.args if isinstance(node, cst.Call) else node.elements


def _with_elements(node: Bracketed, elements: Sequence[Element]) -> Bracketed:
    if isinstance(node, cst.FunctionDef):
        return node.with_changes(params=node.params.with_changes(params=elements))
    if isinstance(node, cst.Parameters):
        return node.with_changes(params=elements)
    if isinstance(node, cst.Call):
        return node.with_changes(args=elements)
    return node.with_changes(elements=elements)


def _opening(node: Bracketed) -> cst.BaseParenthesizableWhitespace:
    if isinstance(node, cst.FunctionDef):
        return node.whitespace_before_params
    if isinstance(node, cst.Parameters):
        return cst.SimpleWhitespace("")  # the def owns it: never changed from here
    if isinstance(node, cst.Call):
        return node.whitespace_before_args
    bracket = node.lbrace if isinstance(node, (cst.Dict, cst.Set)) else node.lbracket
    return bracket.whitespace_after


def _with_opening(node: Bracketed, ws: cst.BaseParenthesizableWhitespace) -> Bracketed:
    if isinstance(node, cst.FunctionDef):
        return node.with_changes(whitespace_before_params=ws)
    if isinstance(node, cst.Call):
        return node.with_changes(whitespace_before_args=ws)
    if isinstance(node, (cst.Dict, cst.Set)):
        return node.with_changes(lbrace=node.lbrace.with_changes(whitespace_after=ws))
    if isinstance(node, cst.List):
        return node.with_changes(lbracket=node.lbracket.with_changes(whitespace_after=ws))
    return node  # a def's parameters alone: their opening bracket belongs to the def


def _with_closing(node: Bracketed, ws: cst.BaseParenthesizableWhitespace) -> Bracketed:
    """The whitespace before the closing bracket (after a trailing comma, if any)."""
    elements = list(_elements(node))
    last = elements[-1]
    if isinstance(last.comma, cst.Comma):
        elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=ws))
        ws = cst.SimpleWhitespace("")
    elif isinstance(last, cst.Arg):
        elements[-1] = last.with_changes(whitespace_after_arg=ws)
        ws = cst.SimpleWhitespace("")
    elif isinstance(last, cst.Param):
        elements[-1] = last.with_changes(whitespace_after_param=ws)
        ws = cst.SimpleWhitespace("")
    node = _with_elements(node, elements)
    if isinstance(node, (cst.Call, cst.FunctionDef, cst.Parameters)):
        return node
    if isinstance(node, (cst.Dict, cst.Set)):
        return node.with_changes(rbrace=node.rbrace.with_changes(whitespace_before=ws))
    return node.with_changes(rbracket=node.rbracket.with_changes(whitespace_before=ws))


def _break(spaces: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=(), indent=False, last_line=cst.SimpleWhitespace(spaces))


def _separated(elements: Sequence[Element], ws: cst.BaseParenthesizableWhitespace,
               trailing: bool) -> list[Element]:
    out: list[Element] = []
    for index, element in enumerate(elements):
        last = index == len(elements) - 1
        if not last:
            comma = element.comma if isinstance(element.comma, cst.Comma) else cst.Comma()
            element = element.with_changes(comma=comma.with_changes(whitespace_before=cst.SimpleWhitespace(""),
                                                                    whitespace_after=ws))
        elif trailing:
            element = element.with_changes(comma=cst.Comma())
        else:
            element = element.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if isinstance(element, cst.Arg):
            element = element.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        elif isinstance(element, cst.Param):
            element = element.with_changes(whitespace_after_param=cst.SimpleWhitespace(""))
        out.append(element)
    return out


def _closing(node: Bracketed) -> cst.BaseParenthesizableWhitespace:
    last = _elements(node)[-1]
    if isinstance(last.comma, cst.Comma):
        return last.comma.whitespace_after
    if isinstance(last, cst.Arg):
        return last.whitespace_after_arg
    if isinstance(last, cst.Param):
        return last.whitespace_after_param
    if isinstance(node, (cst.Dict, cst.Set)):
        return node.rbrace.whitespace_before
    if isinstance(node, cst.List):
        return node.rbracket.whitespace_before
    return cst.SimpleWhitespace("")


def _split(node: Bracketed, indent: str, style: CodeStyle, open_column: int) -> Bracketed:
    """A one-line bracket split after its opening bracket (hanging) or at the commas that fit (aligned)."""
    elements = list(_elements(node))
    if not style.hanging and not isinstance(node, cst.Parameters):
        aligned = _aligned(node, elements, style, open_column)
        if not aligned.deep_equals(node):
            return aligned
    if isinstance(node, cst.Parameters):
        return _aligned(node, elements, style, open_column)  # the bracket itself belongs to the def
    node = _with_elements(node, _separated(elements, cst.SimpleWhitespace(" "), trailing=False))
    node = _with_opening(node, _break(indent + style.unit))
    return _with_closing(node, _break(indent))


def _aligned(node: Bracketed, elements: list[Element], style: CodeStyle, open_column: int) -> Bracketed:
    """An element that would cross the line length starts a new line, under the first element."""
    column = open_column + 1
    pad = " " * column
    out: list[Element] = []
    position = column
    for index, element in enumerate(elements):
        length = len(_code(element.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip())
        length += 2 if index < len(elements) - 1 else 1  # ", " or the closing bracket
        if index > 0:
            previous = out[-1]
            comma = previous.comma if isinstance(previous.comma, cst.Comma) else cst.Comma()
            wraps = position + length > style.width
            out[-1] = previous.with_changes(comma=comma.with_changes(
                whitespace_after=_break(pad) if wraps else cst.SimpleWhitespace(" ")))
            if wraps:
                position = column
        out.append(element)
        position += length
    return _with_elements(node, out)


def _break_more(node: Bracketed, span: Callable[[cst.CSTNode], Optional[tuple[int, int]]], full: str,
                line_start: int, line_end: int, style: CodeStyle) -> Optional[Bracketed]:
    """In a bracket spread over lines, start a new line at the first element on the long line that
    crosses the limit, with the whitespace of a line break the bracket already has; a bracket in
    black's hanging style whose elements share their one line becomes one element a line."""
    elements = list(_elements(node))
    breaks = [e.comma.whitespace_after for e in elements[:-1]
              if isinstance(e.comma, cst.Comma) and isinstance(e.comma.whitespace_after, cst.ParenthesizedWhitespace)]
    opening = _opening(node)
    if not breaks and isinstance(opening, cst.ParenthesizedWhitespace):
        closing = _closing(node)
        model = opening.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
        return _with_closing(_with_elements(node, _separated(elements, model, trailing=True)), closing)
    if not breaks:
        return None
    model = breaks[-1]
    assert isinstance(model, cst.ParenthesizedWhitespace)
    model = model.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    for index, element in enumerate(elements):
        where = span(element)
        if index == 0 or where is None or not line_start <= where[0] <= line_end:
            continue
        code_end = where[0] + len(_code(element.with_changes(comma=cst.MaybeSentinel.DEFAULT)).rstrip())
        if _column(full, code_end) + 1 <= style.width:
            continue
        previous = elements[index - 1]
        if not isinstance(previous.comma, cst.Comma) or isinstance(previous.comma.whitespace_after,
                                                                   cst.ParenthesizedWhitespace):
            return None
        elements[index - 1] = previous.with_changes(comma=previous.comma.with_changes(whitespace_after=model))
        return _with_elements(node, elements)
    return None


def _wrapped_ifexp(node: cst.IfExp, indent: str, style: CodeStyle, bare: bool) -> cst.IfExp:
    """`x if c else y`, one part a line: in its own parentheses (new ones, or the ones it has), or
    `bare` where it alone fills a line inside brackets already."""
    if bare and not node.lpar:
        own = _break(indent)
        return node.with_changes(whitespace_before_if=own, whitespace_before_else=own)
    inner = _break(indent + style.unit)
    lpar = node.lpar[0] if node.lpar else cst.LeftParen()
    rpar = node.rpar[-1] if node.rpar else cst.RightParen()
    return node.with_changes(
        lpar=[*node.lpar[:-1], lpar.with_changes(whitespace_after=inner)] if node.lpar else [
            lpar.with_changes(whitespace_after=inner)],
        rpar=[rpar.with_changes(whitespace_before=_break(indent)), *node.rpar[1:]],
        whitespace_before_if=inner, whitespace_before_else=inner,
    )


def _inside_brackets(full: str, offset: int) -> bool:
    """The code at `offset` starts its line, and the line before ends with an open bracket or a comma."""
    start = _line_start(full, offset)
    if full[start:offset].strip():
        return False
    before = full[:start].rstrip()
    return before.endswith(("(", "[", "{", ","))


def _reflowed(line: cst.EmptyLine, width: int) -> cst.FlattenSentinel:
    """A comment line split at spaces into lines of at most `width` characters."""
    assert line.comment is not None
    text = line.comment.value
    marker = re.match(r"#+\s*", text)
    head = marker.group(0) if marker else "# "
    words = text[len(head):].split()
    lines: list[str] = []
    current = head
    for word in words:
        if current.strip("# ") and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = head + word
        else:
            current = current + ("" if current == head else " ") + word
    lines.append(current)
    return cst.FlattenSentinel([line.with_changes(comment=cst.Comment(value)) for value in lines])
