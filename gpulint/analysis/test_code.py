"""Test code outside test files: a `test_*` function that checks results against a reference.

Test files (by `test-patterns`) are left alone by the training, loader and optimizer rules, whose
advice would change fp32 references and bitwise checks. A function named `test_*` that asserts
(`assert`, `assert_close`, `assertEqual`, `torch.testing`, `numpy.testing`) is such a test even in a
file whose name pytest would not collect (a `utils.py` with self-tests, a `benchmark.py`).
"""

from __future__ import annotations

import libcst as cst

from gpulint.analysis.training import training_facts
from gpulint.core.context import FileContext
from gpulint.core.walk import walk


def in_test_function(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`node` lies in a `test_*` function (or a method of a `Test*` class) that compares results."""
    facts = ctx.analysis(training_facts)
    for ancestor in facts.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef) and ancestor.name.value.startswith("test") \
                and id(ancestor) in ctx.analysis(_comparing_functions):
            return True
    return False


def _comparing_functions(ctx: FileContext) -> frozenset[int]:
    """The `test*` functions of the file whose body asserts something."""
    found: set[int] = set()

    class _Tests(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value.startswith("test") and _asserts(node):
                found.add(id(node))

    walk(ctx.module, _Tests())
    return frozenset(found)


def _asserts(function: cst.FunctionDef) -> bool:
    checks = False

    class _Checks(cst.CSTVisitor):
        def visit_Assert(self, node: cst.Assert) -> None:
            nonlocal checks
            checks = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal checks
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else ""
            if name.startswith("assert") or name == "allclose":
                checks = True

    walk(function.body, _Checks())
    return checks
