"""The fast read-only walk visits what LibCST's own `visit` visits, in the same order."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.core.walk import TRIVIA, trivia_skip, walk

SOURCE = '''\
"""Doc."""
import torch, os.path as p  # comment
from torch.utils.data import (DataLoader as DL,)


@decorator(arg=1)
async def train(a, /, b: int = 2, *args, c=[x for x in range(3) if x], **kw) -> "T":
    global g
    with torch.autocast("cuda") as ctx, open(f"{a!r:>{b}}") as fh:
        async for i in aiter():
            y = lambda q=1: q ** -i
            z: dict = {**kw, "k": (yield)}
            del z["k"]
    try:
        pass
    except* (ValueError, TypeError) as e:
        raise RuntimeError() from e
    match a:
        case [1, *rest] | {"k": _}:
            return DL(b)[1:2, ::3]
        case Point(x=0) if b:
            ...


class C(Base, metaclass=M):
    x = 1; y = 2
'''


class Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", type(node).__name__))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", type(original_node).__name__))


def test_same_order_as_libcst_visit() -> None:
    module = cst.parse_module(SOURCE)
    theirs, ours = Recorder(), Recorder()
    module.visit(theirs)
    walk(module, ours, skip=None)
    assert ours.events == theirs.events


def test_trivia_skipped_only_when_no_visitor_wants_it() -> None:
    module = cst.parse_module(SOURCE)
    theirs, ours = Recorder(), Recorder()
    module.visit(theirs)
    walk(module, ours)
    trivia = {t.__name__ for t in TRIVIA}

    def without_trivia(events: list[tuple[str, str]]) -> list[tuple[str, str]]:
        out, depth = [], 0
        for kind, name in events:  # drop trivia nodes and everything inside them
            if name in trivia or depth:
                depth += 1 if kind == "visit" else -1
                continue
            out.append((kind, name))
        return out

    assert ours.events == without_trivia(theirs.events)
    assert ("visit", "Comment") not in ours.events
    assert trivia_skip({cst.Call}) == TRIVIA
    assert trivia_skip({cst.Call, cst.Comment}) == frozenset()


def test_false_from_visit_skips_children_but_still_leaves() -> None:
    class NoCalls(Recorder):
        def on_visit(self, node: cst.CSTNode) -> bool:
            super().on_visit(node)
            return not isinstance(node, cst.Call)

    recorder = NoCalls()
    walk(cst.parse_module("f(g(x))\n"), recorder)
    names = [name for _, name in recorder.events]
    assert names.count("Call") == 2 and "Arg" not in names  # the outer call's visit and leave


@pytest.mark.parametrize("depth", [5000])
def test_deep_trees_do_not_recurse(depth: int) -> None:
    node: cst.BaseExpression = cst.Name("x")
    for _ in range(depth):
        node = cst.UnaryOperation(cst.Minus(), node)
    count = Recorder()
    walk(node, count)
    assert count.events.count(("visit", "UnaryOperation")) == depth


class Typed(cst.CSTVisitor):
    """LibCST's own dispatch (no on_visit override): `visit_<Type>` / `leave_<Type>` methods, one
    that prunes, one that is a staticmethod, and a node type nothing handles."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.events.append(f"visit Call {type(node.func).__name__}")

    def leave_Call(self, original_node: cst.Call) -> None:
        self.events.append("leave Call")

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.events.append("visit Lambda (pruned)")
        return False

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.events.append("leave Lambda")

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(f"Name {node.value}")

    @staticmethod
    def visit_Integer(node: cst.Integer) -> None:
        SEEN_INTEGERS.append(node.value)


SEEN_INTEGERS: list[str] = []


def test_typed_dispatch_matches_libcst_visit() -> None:
    """walk() looks a visitor's `visit_<Type>` up once per class and type; what it calls, and in what
    order, must stay LibCST's."""
    module = cst.parse_module(SOURCE + "f(lambda q=g(1): h(q), 2)\n")
    theirs, ours = Typed(), Typed()
    SEEN_INTEGERS.clear()
    module.visit(theirs)
    their_integers = list(SEEN_INTEGERS)
    SEEN_INTEGERS.clear()
    walk(module, ours)
    assert ours.events == theirs.events and SEEN_INTEGERS == their_integers
    assert "visit Lambda (pruned)" in ours.events and "Name h" not in ours.events
    assert their_integers  # the staticmethod was called


def test_an_on_visit_of_the_instance_is_honoured() -> None:
    """A visitor whose on_visit is replaced on the instance keeps it (no cached class dispatch)."""
    visitor = Typed()
    seen: list[str] = []
    visitor.on_visit = lambda node: seen.append(type(node).__name__) or True  # type: ignore[method-assign]
    walk(cst.parse_module("f(x)\n"), visitor)
    assert "Call" in seen and visitor.events == ["leave Call"]
