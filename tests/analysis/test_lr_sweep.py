"""LR range tests (analysis/lr_sweep.py): the three signs a sweep needs, and loops numbered alike in both trees."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst

from gpulint.analysis.lr_sweep import _cst_loop_order, _loops_in_order, find_sweeps
from gpulint.core.context import FileContext
from gpulint.core.settings import Settings

SWEEP = """
for lr in np.logspace(-7, 1, 100):
    for group in opt.param_groups:
        group["lr"] = lr
    loss = step(model, next(batches))
    loss.backward()
    opt.step()
    lrs.append(lr)
    if math.isnan(loss.item()):
        break
"""


def _sweep_lines(code: str) -> list[int]:
    code = textwrap.dedent(code)
    return [loop.lineno for loop in find_sweeps(ast.parse(code), code).loops]


def test_a_logspace_sweep_that_records_and_stops_on_the_loss() -> None:
    assert _sweep_lines(SWEEP) == [2]


def test_each_sign_is_needed() -> None:
    assert _sweep_lines(SWEEP.replace("        break", "        print('nan')")) == []  # never stops
    assert _sweep_lines(SWEEP.replace("lrs.append(lr)", "pass")) == []  # records no rate
    assert _sweep_lines(SWEEP.replace("np.logspace(-7, 1, 100)", "rates")) == []  # a rate from a list
    assert _sweep_lines(SWEEP.replace("loss.backward()", "pass")) == []  # trains nothing


def test_a_linear_warm_up_is_no_sweep() -> None:
    warm_up = """
    for it, batch in enumerate(loader):
        opt.param_groups[0]["lr"] = base_lr * min(1.0, it / warmup)
        loss = model(batch)
        loss.backward()
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
        if torch.isnan(loss):
            break
    """
    assert _sweep_lines(warm_up) == []
    assert _sweep_lines(warm_up.replace("base_lr * min(1.0, it / warmup)", "opt.param_groups[0]['lr'] * 1.1")) == [2]
    assert _sweep_lines(warm_up.replace('opt.param_groups[0]["lr"] = base_lr * min(1.0, it / warmup)',
                                        'opt.param_groups[0]["lr"] *= 1.1')) == [2]


def test_loops_are_numbered_alike_in_ast_and_libcst() -> None:
    code = textwrap.dedent("""
    @decorate(lambda: [x for x in range(3)])
    def f(items):
        for a in items:
            while a:
                a -= 1
        try:
            for b in items:
                pass
        except ValueError:
            while False:
                pass
        else:
            for c in items:
                pass
        finally:
            for d in items:
                pass

    class K:
        async def g(self, items):
            async for e in items:
                with open(e) as handle:
                    for f in handle:
                        pass
            if items:
                for g in items:
                    pass
            else:
                for h in items:
                    pass
    """)
    module = cst.parse_module(code)
    order = _cst_loop_order(FileContext(Path("x.py"), code, module, Settings()))
    spelled = {}

    class Loops(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            spelled[order[id(node)]] = module.code_for_node(node.target)

        def visit_While(self, node: cst.While) -> None:
            spelled[order[id(node)]] = module.code_for_node(node.test)

    module.visit(Loops())
    from_ast = [ast.unparse(n.target if isinstance(n, (ast.For, ast.AsyncFor)) else n.test)
                for n in _loops_in_order(ast.parse(code))]
    assert [spelled[i] for i in range(len(spelled))] == from_ast
    assert len(from_ast) == 10
