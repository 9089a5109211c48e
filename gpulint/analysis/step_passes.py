"""Passes of a step loop: which iterations run a node, in what order, and whether they train.

A step loop (analysis/steps.py) often serves more than one kind of pass: `run_epoch(loader, train)`
calls backward under `if train:` and counts correct predictions under `else:`; a notebook's
`main_loop(phase, ...)` steps the optimizer under `if phase == LoopPhase.TRAIN:` and logs under
`elif phase == LoopPhase.VAL:`. A node whose branch excludes every backward of its loop runs only on
passes that do not train, so costs the rules count per *training* step do
not apply to it.

The conditions leading from the step loop to a node are read lexically and through the same-file
calls `StepFacts.place` follows: `If` branches (and conditional expressions), each with the branch
taken. Two conditions exclude each other when they are the two branches of one `if`, the same test
taken both ways (`if train:` ... `if not train:`), or equality tests of one name against two different
constants or dotted names (`phase == "train"` / `phase == "val"`), provided the loop does not rebind
the name. A node's *order* in its step is the positions of the calls leading to it from the loop
body, then its own: what runs first in an iteration sorts first.

This module only reads `ast` trees through a `StepFacts`.
"""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.analysis.steps import StepFacts, StepLoop
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.records import dataclass

TRAINING_PASS = Premise(
    "training-pass",
    "the node runs on passes that train: refuted when it lies in a branch that excludes every backward "
    "of its step loop: the other branch of the `if` that trains (`if train: loss.backward() ... else: acc += "
    "pred.eq(y).sum().item()`), or a test of the same phase name against "
    "another value (`if phase == 'train': ...` / `elif phase == 'val': ...`) the loop does not rebind; "
    "such a pass evaluates and stalls no training step. A branch that excludes only the optimizer step (the "
    "micro-steps of gradient accumulation) still trains.")

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_MAX_PATHS = 16


@dataclass(frozen=True)
class Branch:
    """One condition on the way from a step loop to a node: `test` held `taken` (True: body)."""

    node: ast.AST  # the `If` or `IfExp`
    test: ast.expr
    taken: bool


@dataclass(frozen=True)
class Path:
    """One way an iteration of a step loop reaches a node."""

    branches: tuple[Branch, ...]
    order: tuple[tuple[int, int], ...]  # positions of the calls leading to the node, then the node's own
    looped: bool  # an inner loop, `except` handler, comprehension or short-circuit on the way

    @property
    def unconditional(self) -> bool:
        return not self.branches and not self.looped


class StepPasses:
    """Questions about the passes of the step loops of one module."""

    def __init__(self, facts: StepFacts) -> None:
        self.facts = facts
        self._paths: dict[tuple[int, int], list[Path]] = {}
        self._rebound: dict[int, set[str]] = {}

    # -- paths ------------------------------------------------------------------------------------
    def paths(self, node: ast.AST, step: StepLoop) -> list[Path]:
        """The ways an iteration of `step` reaches `node` (lexically, or through same-file calls)."""
        key = (id(node), id(step))
        found = self._paths.get(key)
        if found is None:
            found = self._walk(node, step, frozenset())
            self._paths[key] = found
        return found

    def _walk(self, node: ast.AST, step: StepLoop, seen: frozenset[int]) -> list[Path]:
        branches: list[Branch] = []
        looped = False
        child: ast.AST = node
        for ancestor in self.facts.ancestors(node):
            if ancestor is step.loop:
                if child not in step.loop.body:
                    return []  # the loop's test, iterable or `else`
                return [Path(tuple(reversed(branches)), (_position(node),), looped)]
            if isinstance(ancestor, ast.If) and child is not ancestor.test:
                branches.append(Branch(ancestor, ancestor.test, child in ancestor.body))
            elif isinstance(ancestor, ast.IfExp) and child is not ancestor.test:
                branches.append(Branch(ancestor, ancestor.test, child is ancestor.body))
            elif isinstance(ancestor, ast.BoolOp) and child is not ancestor.values[0]:
                looped = True
            elif isinstance(ancestor, (*_LOOPS, ast.ExceptHandler, ast.comprehension)) \
                    or type(ancestor).__name__ == "match_case":
                looped = True
            elif isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
                return []
            elif isinstance(ancestor, _FUNCTIONS):
                if id(ancestor) in seen:
                    return []
                found: list[Path] = []
                for call in self.facts.call_sites(ancestor):
                    for outer in self._walk(call, step, seen | {id(ancestor)}):
                        found.append(Path(outer.branches + tuple(reversed(branches)),
                                          outer.order + (_position(node),),
                                          outer.looped or looped))
                        if len(found) >= _MAX_PATHS:
                            return found
                return found
            child = ancestor
        return []

    def order(self, node: ast.AST, step: StepLoop) -> Optional[tuple[tuple[int, int], ...]]:
        """Where `node` runs in an iteration of `step`: the earliest of its paths (None: not in the step)."""
        orders = [p.order for p in self.paths(node, step)]
        return min(orders) if orders else None

    def unconditional(self, node: ast.AST, step: StepLoop) -> bool:
        """Every iteration of `step` runs `node` (on some path with no branch, inner loop or handler)."""
        return any(p.unconditional for p in self.paths(node, step))

    # -- exclusion --------------------------------------------------------------------------------
    def exclusive(self, a: ast.AST, b: ast.AST, step: StepLoop) -> bool:
        """No iteration of `step` runs both: every path to `a` and every path to `b` take conditions that
        exclude each other."""
        paths_a, paths_b = self.paths(a, step), self.paths(b, step)
        if not paths_a or not paths_b:
            return False
        return all(self._paths_exclude(pa, pb, step) for pa in paths_a for pb in paths_b)

    def _paths_exclude(self, a: Path, b: Path, step: StepLoop) -> bool:
        return any(self._branches_exclude(x, y, step) for x in a.branches for y in b.branches)

    def _branches_exclude(self, x: Branch, y: Branch, step: StepLoop) -> bool:
        if x.node is y.node:
            return x.taken != y.taken
        if not (self._stable(x.test, step) and self._stable(y.test, step)):
            return False
        facts_x, facts_y = _atoms(x.test, x.taken), _atoms(y.test, y.taken)
        return any(_contradict(p, q) for p in facts_x for q in facts_y)

    def _stable(self, test: ast.expr, step: StepLoop) -> bool:
        """The names the test reads are not rebound in the step loop (a phase fixed for the pass)."""
        rebound = self._rebound.get(id(step))
        if rebound is None:
            rebound = set()
            for node in walk_nodes(step.loop):
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    rebound.add(ast.dump(node, annotate_fields=False).replace("Store()", "Load()")
                                .replace("Del()", "Load()"))
            self._rebound[id(step)] = rebound
        return not any(ast.dump(n, annotate_fields=False) in rebound for n in walk_nodes(test)
                       if isinstance(n, (ast.Name, ast.Attribute)))

    def trains(self, node: ast.AST, step: StepLoop) -> Evidence:
        """TRAINING_PASS for a node of `step`: refuted when it excludes every backward of the loop (excluding
        only the optimizer step is gradient accumulation: `else:` of `if (i + 1) % accum == 0:` still trains)."""
        backwards = [b.call for b in step.backwards]
        if backwards and all(self.exclusive(node, b, step) for b in backwards):
            return REFUTED
        return SHOWN

    def dominates(self, earlier: ast.AST, later: ast.AST, step: StepLoop) -> bool:
        """Every iteration that runs `later` has run `earlier` before it: on some path to each, `earlier`
        comes first and takes no condition `later` does not."""
        return any(pe.order < pl.order and _within_branches(pe, pl)
                   for pe in self.paths(earlier, step) if not pe.looped for pl in self.paths(later, step))


def _within_branches(earlier: Path, later: Path) -> bool:
    """The earlier path takes no branch the later one does not take the same way."""
    taken = {(id(b.node), b.taken) for b in later.branches}
    return all((id(b.node), b.taken) in taken for b in earlier.branches)


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


# an atom: (subject, value, holds): `phase == "train"` is (dump(phase), "train", True); a bare test
# `train` is (dump(train), None, True)
_Atom = tuple[str, Optional[str], bool]


def _atoms(test: ast.expr, taken: bool) -> list[_Atom]:
    """What is known when `test` evaluated to `taken`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _atoms(test.operand, not taken)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) == taken:  # `a and b` true, or `a or b` false: every operand is
            return [a for v in test.values for a in _atoms(v, taken)]
        return []
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            holds = taken if isinstance(op, (ast.Eq, ast.Is)) else not taken
            for subject, value in ((left, right), (right, left)):
                spelled = _value(value)
                if spelled is not None and _value(subject) is None and _subject(subject):
                    return [(_dump(subject), spelled, holds)]
        return [(_dump(test), None, taken)]
    if _subject(test):
        return [(_dump(test), None, taken)]
    return []


def _contradict(p: _Atom, q: _Atom) -> bool:
    if p[0] != q[0]:
        return False
    if p[1] == q[1]:
        return p[2] != q[2]
    # the same subject equal to two different values
    return p[1] is not None and q[1] is not None and p[2] and q[2]


def _value(expr: ast.expr) -> Optional[str]:
    """A constant or a dotted name spelled in capitals or as an enum member (`LoopPhase.TRAIN`)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, int, bool, type(None))):
        return repr(expr.value)
    if isinstance(expr, ast.Attribute) and expr.attr.isupper():
        return _dump(expr)
    return None


def _subject(expr: ast.expr) -> bool:
    """A name or attribute read (`train`, `phase`, `self.training`, `args.mode`), or a call of none."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _dump(expr: ast.AST) -> str:
    return ast.dump(expr, annotate_fields=False)
