"""Passes of a step loop (analysis/step_passes.py): which branches train, in what order a step runs its nodes."""

from __future__ import annotations

import ast
import textwrap

from gpulint.analysis.ast_context import AstNames
from gpulint.analysis.evidence import REFUTED, SHOWN
from gpulint.analysis.step_passes import StepPasses
from gpulint.analysis.steps import StepFacts, StepLoop, step_facts_of


def passes(source: str) -> tuple[StepFacts, StepPasses, StepLoop]:
    tree = ast.parse(textwrap.dedent(source))
    facts = step_facts_of(tree, AstNames(tree).qualname)
    assert len(facts.steps) == 1
    return facts, StepPasses(facts), facts.steps[0]


def node_at(f: StepFacts, text: str, nth: int = 0) -> ast.AST:
    found = [n for n in ast.walk(f.tree) if isinstance(n, ast.expr) and ast.unparse(n) == text]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return found[nth]


ELSE_BRANCH = """
def run(loader, train):
    for x, y in loader:
        out = model(x)
        loss = crit(out, y)
        if train:
            loss.backward()
            opt.step()
        else:
            acc = out.eq(y).sum().item()
        seen = loss.item()
"""


def test_the_else_of_the_training_branch_does_not_train() -> None:
    f, p, step = passes(ELSE_BRANCH)
    assert p.trains(node_at(f, "out.eq(y).sum().item()"), step) is REFUTED
    assert p.trains(node_at(f, "loss.item()"), step) is SHOWN


PHASES = """
def main_loop(phase, loader):
    for x, y in loader:
        loss = crit(model(x), y)
        if phase == LoopPhase.TRAIN:
            loss.backward()
            opt.step()
        if phase == LoopPhase.TRAIN and log:
            a = loss.item()
        elif phase == LoopPhase.VAL:
            b = loss.item()
        if not phase == LoopPhase.TRAIN:
            c = loss.item()
"""


def test_two_values_of_one_phase_exclude_each_other() -> None:
    f, p, step = passes(PHASES)
    assert p.trains(node_at(f, "loss.item()", 0), step) is SHOWN
    assert p.trains(node_at(f, "loss.item()", 1), step) is REFUTED
    assert p.trains(node_at(f, "loss.item()", 2), step) is REFUTED


REBOUND = """
def main_loop(loader):
    phase = "train"
    for x, y in loader:
        loss = crit(model(x), y)
        if phase == "train":
            loss.backward()
            opt.step()
        if phase == "val":
            b = loss.item()
        phase = next_phase()
"""


def test_a_phase_the_loop_rebinds_is_no_evidence() -> None:
    f, p, step = passes(REBOUND)
    assert p.trains(node_at(f, "loss.item()"), step) is SHOWN


THROUGH_CALLS = """
def train_step(x, y):
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    return loss

def eval_step(x, y):
    return crit(model(x), y).item()

def run(loader, training):
    for x, y in loader:
        first = model(x).sum().item()
        if training:
            loss = train_step(x, y)
        else:
            value = eval_step(x, y)
        if verbose:
            shown = model(x).mean().item()
        last = model(x).max().item()
"""


def test_order_and_branches_follow_calls() -> None:
    f, p, step = passes(THROUGH_CALLS)
    evaluation = node_at(f, "crit(model(x), y).item()")
    assert p.trains(evaluation, step) is REFUTED
    first, shown, last = (node_at(f, t) for t in ("model(x).sum().item()", "model(x).mean().item()",
                                                   "model(x).max().item()"))
    backward = next(n for n in ast.walk(f.tree) if isinstance(n, ast.Call) and ast.unparse(n) == "loss.backward()")
    order = [p.order(n, step) or () for n in (first, backward, shown, last)]
    assert all(order) and order == sorted(order)  # the backward, in a function called from the loop, sorts between
    assert p.dominates(first, last, step)
    assert not p.dominates(shown, last, step)  # only some iterations print
    assert not p.dominates(last, first, step)
    assert p.unconditional(first, step) and not p.unconditional(shown, step)


ACCUMULATION = """
def train(loader):
    for i, (x, y) in enumerate(loader):
        loss = crit(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
        else:
            seen = loss.item()
"""


def test_a_micro_step_of_gradient_accumulation_trains() -> None:
    f, p, step = passes(ACCUMULATION)
    assert p.trains(node_at(f, "loss.item()"), step) is SHOWN
