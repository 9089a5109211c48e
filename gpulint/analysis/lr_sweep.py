"""Learning-rate range tests: training loops too short for a faster step to pay off (issue 21's payoff clause).

An LR range test (an "LR finder") trains for a few dozen to a few hundred iterations at a learning rate that
grows geometrically each iteration, records the rate beside the loss, stops once the loss diverges, and then
plots loss against rate. Nothing it runs lasts long enough for mixed precision (GPU001) or a fused optimizer
(GPU201) to save measurable time, and mixed precision would change the very loss curve it measures. One
premise, LONG_RUN, states this for both rules; the test is structural, never a file name. A loop is a sweep
when it holds a backward pass and, in its own code (nested loops included, nested functions not):

1. the learning rate rises geometrically per iteration: a param group's `"lr"` is multiplied (`g["lr"] *= k`,
   `g["lr"] = g["lr"] * k`), or assigned a power or a name that the loop multiplies or raises to a power
   (`lr *= k`, then `g["lr"] = lr`), or a name the loop takes from `logspace`/`geomspace`; or the loop steps
   a scheduler whose class, defined in this file on an LR scheduler base, computes its rates with a power
   (`base * (end / base) ** (i / n)`);
2. it records the rate per iteration: `.append(...)` of a param group's `"lr"`, of `get_last_lr()` /
   `get_lr()`, or of the name of 1;
3. it stops on the loss: a `break` (or `return`) under an `if` whose test reads a loss, or a value the loop
   computes from one (`isnan(loss)`, `smooth > 4 * best`).

A loop that lacks any of the three is ordinary training (a warm-up, a decay schedule logged for a plot, a
NaN guard) and the premise stays shown: a sweep must be shown, never guessed.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional, Union

from gpulint.analysis.amp_steps import amp_steps
from gpulint.analysis.ast_context import AstContext, dotted
from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.project.ast_nodes import CODE_SCOPES, all_nodes, block_fields, code_children
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.records import dataclass

LONG_RUN = Premise(
    "long-run",
    "the step belongs to a run long enough for a faster step to pay off: refuted in a learning-rate range "
    "test, a loop (or the code around the optimizer, when all of the file's training steps are such loops) "
    "that raises the learning rate geometrically each iteration (a param group's \"lr\" multiplied, set to a "
    "power or to a name the loop multiplies, or a scheduler class of the file computing a power), records "
    "the rate per iteration (`lrs.append(...)`), and breaks when the loss diverges (`if isnan(loss): break`). "
    "A loop missing one of the three is ordinary training.")

AstLoop = Union[ast.For, ast.AsyncFor, ast.While]
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_GEOMETRIC_RANGES = frozenset({"logspace", "geomspace"})
_RATE_GETTERS = frozenset({"get_last_lr", "get_lr"})
# what the file's text must hold for a sweep to be there at all: skip the walk otherwise
_NEEDLES = ("lr", ".append(", "backward")


@dataclass(frozen=True)
class LrSweeps:
    """The loops of one file that are LR range tests."""

    loops: tuple[AstLoop, ...] = ()


def find_sweeps(tree: ast.Module, text: str) -> LrSweeps:
    """The LR range tests of a module (the docstring above says what one is)."""
    if not all(needle in text for needle in _NEEDLES) or ("break" not in text and "return" not in text):
        return LrSweeps()
    loops = list(_loops_in_order(tree))
    schedulers = _power_schedulers(tree)
    return LrSweeps(tuple(loop for loop in loops if _is_sweep(loop, tree, schedulers)))


def lr_sweeps(ctx: AstContext) -> LrSweeps:
    """The shared analysis on `ast`: `ctx.analysis(lr_sweeps)`."""
    return find_sweeps(ctx.tree, ctx.text)


def optimizer_run(ctx: AstContext, call: ast.Call) -> Evidence:
    """LONG_RUN for an optimizer built at `call` (GPU201): refuted when it only ever steps in a sweep. In a
    function: the function holds a sweep, every training step of it (analysis/amp_steps.py) is in one, and the
    optimizer stays there (assigned to a name that is not returned, stored elsewhere or handed to a function).
    At module level: the module's code holds a sweep and every training step of the file is in one."""
    sweeps = ctx.analysis(lr_sweeps)
    if not sweeps.loops:
        return SHOWN
    scope = _scope(ctx, call)
    if not any(_scope(ctx, loop) is scope for loop in sweeps.loops):
        return SHOWN
    steps = [b.step for b in ctx.analysis(amp_steps).backwards]
    if scope is not ctx.tree:
        steps = [s for s in steps if s is scope or any(a is scope for a in ctx.ancestors(s))]
        if not _stays_in(ctx, call, scope):
            return SHOWN
    inside = set(map(id, sweeps.loops))
    if steps and all(any(id(a) in inside for a in [step, *ctx.ancestors(step)]) for step in steps):
        return REFUTED
    return SHOWN


def _stays_in(ctx: AstContext, call: ast.Call, function: ast.AST) -> bool:
    """The optimizer built at `call` is assigned to a name of `function` that no `return` hands back, no
    statement stores elsewhere, and no call passes to a function (a scheduler class may take it)."""
    parent = ctx.parent(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    for node in walk_nodes(function):
        if isinstance(node, ast.Return) and node.value is not None and name in _names(node.value):
            return False
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
            return False
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == name
                                              for a in [*node.args, *(k.value for k in node.keywords)]):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            if not callee[:1].isupper():
                return False  # `train_one_epoch(model, optimizer)`: it may step elsewhere
    return True


def step_run(ctx: AstContext, node: ast.AST) -> Evidence:
    """LONG_RUN for a training step (GPU001; `node` is its loop or function): refuted when its loop, or a loop
    around it in the same function, is a sweep."""
    sweeps = ctx.analysis(lr_sweeps)
    if not sweeps.loops:
        return SHOWN
    inside = set(map(id, sweeps.loops))
    for each in [node, *ctx.ancestors(node)]:
        if isinstance(each, CODE_SCOPES):
            return SHOWN
        if id(each) in inside:
            return REFUTED
    return SHOWN


def _loops_in_order(node: ast.AST) -> Iterator[AstLoop]:
    """Loop statements in document order (pre-order, fields in source order, as LibCST walks). A loop is a
    statement, and only statement lists hold statements (and the `except` and `case` clauses that hold
    theirs): the walk follows those, not the expressions (most of the nodes)."""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if current is not node and isinstance(current, _LOOPS):
            yield current
        for field in reversed(block_fields(type(current))):
            block = getattr(current, field, None)
            if type(block) is list:  # (a lambda's `body` is an expression)
                stack.extend(reversed(block))



def _scope(ctx: AstContext, node: ast.AST) -> ast.AST:
    return next((a for a in ctx.ancestors(node) if isinstance(a, CODE_SCOPES)), ctx.tree)


def _own_nodes(loop: AstLoop) -> Iterator[ast.AST]:
    """The loop's code: its body and else branch, nested loops included, nested functions and classes not."""
    stack: list[ast.AST] = [*loop.body, *loop.orelse]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in code_children(node) if not isinstance(c, CODE_SCOPES))


def _rate_key(target: ast.AST) -> bool:
    """`group["lr"]`, `optimizer.param_groups[0]["lr"]`."""
    return isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
        and target.slice.value == "lr"


def _has_power(expr: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in walk_nodes(expr))


def _names(expr: ast.AST) -> set[str]:
    return {n.id for n in walk_nodes(expr) if isinstance(n, ast.Name)}


def _is_sweep(loop: AstLoop, tree: ast.Module, schedulers: frozenset[str]) -> bool:
    nodes = list(_own_nodes(loop))
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
               for n in nodes):
        return False
    rates = _geometric_rates(loop, nodes, tree, schedulers)
    if rates is None:
        return False
    return _records_rate(nodes, rates) and _stops_on_loss(nodes)


def _geometric_rates(loop: AstLoop, nodes: list[ast.AST], tree: ast.Module,
                     schedulers: frozenset[str]) -> Optional[set[str]]:
    """The names that carry the geometric rate (possibly none), or None when the rate does not rise
    geometrically in this loop."""
    growing: set[str] = set()  # names the loop multiplies or raises to a power
    for node in nodes:
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Mult):
            growing.add(node.target.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if _has_power(value) or (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult)
                                     and name in _names(value)):
                growing.add(name)
        elif isinstance(node, (ast.For, ast.AsyncFor)) and any(
                isinstance(c, ast.Call) and (getattr(c.func, "attr", None) or getattr(c.func, "id", None))
                in _GEOMETRIC_RANGES for c in walk_nodes(node.iter)):
            growing |= _names(node.target)  # `for lr in np.logspace(-7, 1, 100)`
    if isinstance(loop, (ast.For, ast.AsyncFor)) and any(
            isinstance(c, ast.Call) and (getattr(c.func, "attr", None) or getattr(c.func, "id", None))
            in _GEOMETRIC_RANGES for c in walk_nodes(loop.iter)):
        growing |= _names(loop.target)
    rates: set[str] = set()
    geometric = False
    for node in nodes:
        if isinstance(node, ast.AugAssign) and _rate_key(node.target) and isinstance(node.op, ast.Mult):
            geometric = True
        elif isinstance(node, ast.Assign) and any(_rate_key(t) for t in node.targets):
            used = _names(node.value) & growing
            multiplied = isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Mult) \
                and any(_rate_key(n) for n in walk_nodes(node.value))  # `g["lr"] = g["lr"] * k`
            if _has_power(node.value) or used or multiplied:
                geometric = True
                rates |= used
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" \
                and _built_from(dotted(node.func.value), tree, schedulers):
            geometric = True
    return rates if geometric else None


def _power_schedulers(tree: ast.Module) -> frozenset[str]:
    """Classes of the file on an LR scheduler base (`_LRScheduler`, `LRScheduler`) whose methods compute a
    power: an exponential ramp."""
    found = set()
    for node in all_nodes(tree):
        if isinstance(node, ast.ClassDef) and any((dotted(b) or "").endswith("LRScheduler") for b in node.bases) \
                and any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and _has_power(f) for f in node.body):
            found.add(node.name)
    return frozenset(found)


def _built_from(receiver: Optional[str], tree: ast.Module, schedulers: frozenset[str]) -> bool:
    """`receiver` is assigned an instance of one of `schedulers` somewhere in the file."""
    if receiver is None or not schedulers:
        return False
    for node in all_nodes(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id in schedulers \
                and any(dotted(t) == receiver for t in node.targets):
            return True
    return False


def _records_rate(nodes: list[ast.AST], rates: set[str]) -> bool:
    """`lrs.append(optimizer.param_groups[0]["lr"])`, `.append(scheduler.get_last_lr()[0])`, `.append(lr)`."""
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and len(node.args) == 1):
            continue
        for part in walk_nodes(node.args[0]):
            if _rate_key(part) or (isinstance(part, ast.Name) and part.id in rates) or (
                    isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute)
                    and part.func.attr in _RATE_GETTERS):
                return True
    return False


def _stops_on_loss(nodes: list[ast.AST]) -> bool:
    """An `if` reading a loss whose body leaves the loop (`if torch.isnan(loss): break`); a loss is a name
    that says so, or one the loop computes from one (`smooth = 0.9 * smooth + 0.1 * loss.item()`)."""
    assigned = [(n.targets[0].id, _names(n.value)) for n in nodes if isinstance(n, ast.Assign)
                and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    assigned += [(n.target.id, _names(n.value)) for n in nodes if isinstance(n, ast.AugAssign)
                 and isinstance(n.target, ast.Name)]
    losses = {name for node in nodes for name in _names(node) if "loss" in name.lower()}
    grown = True
    while grown:
        grown = False
        for name, read in assigned:
            if name not in losses and read & losses:
                losses.add(name)
                grown = True
    for node in nodes:
        if isinstance(node, ast.If) and _names(node.test) & losses \
                and any(isinstance(s, (ast.Break, ast.Return)) for s in node.body):
            return True
    return False
