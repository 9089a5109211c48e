"""Generation-bound step loops (analysis/generation.py): generation on every iteration, not in a periodic eval."""

from __future__ import annotations

import ast
import textwrap

import pytest

from gpulint.analysis.generation import generation_bound_of
from gpulint.analysis.steps import step_facts_of

_STEP = "        loss.backward()\n        opt.step()\n"


def _bound(body: str) -> bool:
    tree = ast.parse(textwrap.dedent(body))
    return generation_bound_of(step_facts_of(tree, lambda expr: None))


@pytest.mark.parametrize(("text", "bound"), [
    # the policy samples on every step, directly or through a same-file helper
    ("for batch in loader:\n        out = policy.generate(batch)\n        loss = policy(out).loss\n" + _STEP, True),
    ("def sample(b):\n    return policy.generate(b)\n"
     "for batch in loader:\n        out = sample(batch)\n        loss = policy(out).loss\n" + _STEP, True),
    # a rollout engine in an outer loop around a few PPO update epochs
    ("for batch in loader:\n    r = engine.rollout(batch)\n    for _ in range(4):\n"
     "        loss = policy(r).loss\n" + _STEP, True),
    # generation only under an interval test, directly or in an evaluation function
    ("for step, batch in enumerate(loader):\n        loss = model(batch).loss\n" + _STEP
     + "        if step % 100 == 0:\n            model.generate(batch)\n", False),
    ("def evaluate(b):\n    return model.generate(b)\n"
     "for step, batch in enumerate(loader):\n        loss = model(batch).loss\n" + _STEP
     + "        if step % 100 == 0:\n            evaluate(batch)\n", False),
    # generation after training, outside every step loop; no step loop at all
    ("for batch in loader:\n        loss = model(batch).loss\n" + _STEP + "model.generate(prompt)\n", False),
    ("for batch in loader:\n    model.generate(batch)\n", False),
])
def test_generation_bound(text: str, bound: bool) -> None:
    assert _bound(text) is bound
