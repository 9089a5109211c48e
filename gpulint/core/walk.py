"""A read-only tree walk that is several times cheaper than `CSTNode.visit`.

LibCST's `visit` rebuilds (and re-validates) every node it passes, even for a read-only
`CSTVisitor`, and recurses three Python frames per tree level. Linting only reads the
tree, so this walk iterates each node's child fields directly, in the order LibCST
itself visits them (read once per node class from LibCST's own `_visit_and_replace_children`),
with an explicit stack (no recursion limit on deeply nested code) and without entering
whitespace, comments and punctuation unless the visitor asks for one of those types.

The visitor protocol is LibCST's: `on_visit(node) -> bool` (False: skip the children)
and `on_leave(node)`; a `cst.CSTVisitor` subclass works as is. Attribute hooks
(`visit_Call_func`) are not called.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from functools import partial
from types import FunctionType
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol

import libcst as cst

_FIELD_VISIT = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")

# Node types that hold only layout: nothing a rule about code looks for lives inside them.
TRIVIA: frozenset[type] = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline,
    cst.EmptyLine, cst.Comment, cst.Comma, cst.Semicolon, cst.Dot, cst.Colon, cst.AssignEqual,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.ImportStar,
})

_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


class Visitor(Protocol):
    def on_visit(self, node: cst.CSTNode) -> bool: ...

    def on_leave(self, original_node: cst.CSTNode) -> None: ...


def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of `node_type` that may hold child nodes, in LibCST's visiting order."""
    fields = _FIELDS.get(node_type)
    if fields is None:
        declared = [f.name for f in dataclasses.fields(node_type)]
        try:
            source = inspect.getsource(node_type._visit_and_replace_children)
            order = [name for name in _FIELD_VISIT.findall(source) if name in declared]
        except (OSError, TypeError):  # no source shipped: declaration order
            order = []
        fields = tuple(dict.fromkeys(order)) if order else tuple(declared)
        _FIELDS[node_type] = fields
    return fields


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    """`issubclass(kind, cst.CSTNode)`, remembered per type: CSTNode is an ABC, and an ABC's
    isinstance check costs several times a dict lookup on the hottest path of every walk."""
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def iter_children(node: cst.CSTNode, skip: frozenset[type] = frozenset()) -> Iterator[cst.CSTNode]:
    """Direct children of `node` in source order, leaving out those whose type is in `skip`."""
    is_node = _IS_NODE.get
    for name in child_fields(type(node)):
        value: Any = getattr(node, name)
        kind = type(value)
        if is_node(kind) or (kind not in _IS_NODE and _is_node(kind)):
            if kind not in skip:
                yield value
        elif kind is tuple or kind is list or isinstance(value, (tuple, list)):
            for item in value:
                kind = type(item)
                if (is_node(kind) or (kind not in _IS_NODE and _is_node(kind))) and kind not in skip:
                    yield item


def trivia_skip(wanted: Iterable[type]) -> frozenset[type]:
    """The layout types a walk may leave out when its visitors want the `wanted` types."""
    wanted = set(wanted)
    if any(issubclass(t, tuple(TRIVIA)) or t in TRIVIA for t in wanted):
        return frozenset()
    return TRIVIA


_STOCK_VISIT = cst.CSTVisitor.on_visit
_STOCK_LEAVE = cst.CSTVisitor.on_leave
# (visitor class, node type) -> its visit_<Type> / leave_<Type> function, or None
_VISIT_METHODS: dict[tuple[type, type], Optional[Callable[[Any, Any], Any]]] = {}
_LEAVE_METHODS: dict[tuple[type, type], Optional[Callable[[Any, Any], Any]]] = {}


def _method(table: dict[tuple[type, type], Optional[Callable[[Any, Any], Any]]], prefix: str, visitor_type: type,
            node_type: type) -> Optional[Callable[[Any, Any], Any]]:
    key = (visitor_type, node_type)
    if key not in table:
        name = f"{prefix}{node_type.__name__}"
        raw = inspect.getattr_static(visitor_type, name, None)
        found: Optional[Callable[[Any, Any], Any]] = raw if isinstance(raw, FunctionType) else None
        if raw is not None and found is None:  # a staticmethod, a callable object: looked up as LibCST does
            found = partial(_bound_call, name)
        table[key] = found
    return table[key]


def _bound_call(name: str, visitor: Any, node: cst.CSTNode) -> Any:
    return getattr(visitor, name)(node)


def callbacks(visitor: Visitor) -> tuple[Callable[[cst.CSTNode], bool], Callable[[cst.CSTNode], None]]:
    """`visitor.on_visit` and `on_leave`; for a `cst.CSTVisitor` that keeps LibCST's own dispatch,
    the same dispatch with the `visit_<Type>` lookup done once per class and node type instead of
    formatting a method name twice for every node."""
    kind = type(visitor)
    if not isinstance(visitor, cst.CSTVisitor) or kind.on_visit is not _STOCK_VISIT \
            or kind.on_leave is not _STOCK_LEAVE or vars(visitor).keys() & _OVERRIDABLE:
        return visitor.on_visit, visitor.on_leave

    def on_visit(node: cst.CSTNode) -> bool:
        node_type = type(node)
        method = _VISIT_METHODS.get((kind, node_type), _UNKNOWN)
        if method is _UNKNOWN:
            method = _method(_VISIT_METHODS, "visit_", kind, node_type)
        return method is None or method(visitor, node) is not False

    def on_leave(node: cst.CSTNode) -> None:
        node_type = type(node)
        method = _LEAVE_METHODS.get((kind, node_type), _UNKNOWN)
        if method is _UNKNOWN:
            method = _method(_LEAVE_METHODS, "leave_", kind, node_type)
        if method is not None:
            method(visitor, node)

    return on_visit, on_leave


_UNKNOWN: Any = object()
_OVERRIDABLE = frozenset({"on_visit", "on_leave"})


def walk(root: cst.CSTNode, visitor: Visitor, skip: Optional[frozenset[type]] = TRIVIA) -> None:
    """Depth-first walk calling `visitor.on_visit` / `on_leave`, like `root.visit(visitor)`."""
    skip = skip or frozenset()
    on_visit, on_leave = callbacks(visitor)
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    pop, push = stack.pop, stack.append
    is_node, fields_of = _IS_NODE.get, _FIELDS.get
    while stack:
        node, leaving = pop()
        if leaving:
            on_leave(node)
            continue
        if on_visit(node) is False:
            on_leave(node)
            continue
        push((node, True))
        # the children, pushed last to first so they are visited in source order (iter_children inlined:
        # this loop runs for every node of every walk)
        fields = fields_of(type(node)) or child_fields(type(node))
        children: list[cst.CSTNode] = []
        for name in fields:
            value = getattr(node, name)
            kind = type(value)
            if is_node(kind) or (kind not in _IS_NODE and _is_node(kind)):
                if kind not in skip:
                    children.append(value)
            elif kind is tuple or kind is list or isinstance(value, (tuple, list)):
                for item in value:
                    kind = type(item)
                    if (is_node(kind) or (kind not in _IS_NODE and _is_node(kind))) and kind not in skip:
                        children.append(item)
        for child in reversed(children):
            push((child, False))


def descendants(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and every node below it, in source order (parents first): for a fix that looks for the
    LibCST node an `ast` finding points into."""
    stack = [root]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
