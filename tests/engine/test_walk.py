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
