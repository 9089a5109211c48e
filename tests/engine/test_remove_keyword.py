"""core/rewrite.remove_keyword: a keyword argument removed without disturbing the call's layout."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.core.rewrite import remove_keyword


@pytest.mark.parametrize("before, after", [
    ("f(a, fused=True)", "f(a)"),
    ("f(a, fused=True, lr=1)", "f(a, lr=1)"),
    ("f(fused=True)", "f()"),
    ("f(\n    a,\n    fused=True,\n)", "f(\n    a,\n)"),
    ("f(\n    a,\n    fused=True,\n    lr=1,\n)", "f(\n    a,\n    lr=1,\n)"),
    ("f(a, lr=1)", "f(a, lr=1)"),
])
def test_remove_keyword_keeps_the_layout(before: str, after: str) -> None:
    call = cst.parse_expression(before)
    assert isinstance(call, cst.Call)
    assert cst.Module([]).code_for_node(remove_keyword(call, "fused")) == after
