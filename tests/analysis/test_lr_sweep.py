"""LR range tests (analysis/lr_sweep.py): the three signs a sweep needs."""

from __future__ import annotations

import ast
import textwrap

from gpulint.analysis.lr_sweep import find_sweeps

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
