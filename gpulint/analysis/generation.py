"""Generation-bound training on `ast`: step loops that wait, on every iteration, on autoregressive generation.

LLM reinforcement learning (GRPO, PPO, agent RL) samples completions from the policy before each update:
`model.generate(...)` (Hugging Face generation) or a rollout engine's `engine.rollout(...)`, hundreds of
forward passes per optimizer step, then reward-model scoring. A per-step saving of a millisecond or two in
the optimizer is then below the noise of the iteration. Only calls that run on every iteration count: in the
step loop's body or a same-file function it calls (`StepFacts.place`), or in the body of a loop around it
(a PPO outer loop that generates once and then runs a few update epochs); a `generate` under an interval
test (`if step % eval_every == 0`) or in an evaluation function called that way does not.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gpulint.analysis.steps import StepFacts, StepLoop, step_facts
from gpulint.project.ast_nodes import CODE_SCOPES
from gpulint.project.ast_nodes import walk as walk_nodes

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

# method names that sample from the policy: HF `generate`, a rollout engine's `rollout`
GENERATION_METHODS = frozenset({"generate", "rollout"})


def generation_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in walk_nodes(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in GENERATION_METHODS]


def _per_iteration_of(facts: StepFacts, call: ast.Call, loop: ast.AST) -> bool:
    """`call` sits in `loop`'s body (same code, not in its `else`) with no interval test or handler between."""
    child: ast.AST = call
    for ancestor in facts.ancestors(call):
        if isinstance(ancestor, CODE_SCOPES):
            return False
        if facts.limits(ancestor, child) is not None:
            return False
        if ancestor is loop:
            return child in getattr(loop, "body", [])
        child = ancestor
    return False


def _generation_bound(facts: StepFacts, step: StepLoop, calls: list[ast.Call]) -> bool:
    for call in calls:
        place = facts.place(call)
        if place is not None and place.step is step and place.every_step:
            return True
        if any(_per_iteration_of(facts, call, outer) for outer in step.epoch_loops):
            return True
    return False


def generation_bound_of(facts: StepFacts) -> bool:
    """Every step loop of the file (at least one) generates on every iteration (of it or of a loop around it)."""
    if not facts.steps:
        return False
    calls = generation_calls(facts.tree)
    if not calls:
        return False
    return all(_generation_bound(facts, step, calls) for step in facts.steps)


def generation_bound(ctx: "AstContext") -> bool:
    """The shared analysis: `ctx.analysis(generation_bound)`."""
    if ".generate(" not in ctx.text and ".rollout(" not in ctx.text:
        return False
    return generation_bound_of(ctx.analysis(step_facts))
