"""Training steps: where a loss goes through backward() and an optimizer steps, and autocast coverage.

One analysis per file, on LibCST, for the mixed-precision fixes (rewrites/): the rules detect on
`ast` (analysis/amp_steps.py, amp_regions.py) and decide their fix there (analysis/amp_fix.py); they
read this only to build the fix's edits (and, in a file that uses Intel GPUs only, to learn how the fix
spells the device: `libcst_backward`). A training step is the innermost
loop (or, failing that, the function) that holds both a backward call on a loss and an
optimizer step. Framework-owned backward (`accelerator.backward(loss)`,
`fabric.backward(loss)`, `engine.backward(loss)`) is not ours: those frameworks own
precision, so they never make a training step.
"""

from __future__ import annotations

import ast
import re
from dataclasses import field
from typing import Iterator, Optional, Union

import libcst as cst

from gpulint.analysis.amp import ANY_AUTOCAST, ANY_GRAD_SCALER, Coverage
from gpulint.analysis.amp_steps import amp_steps
from gpulint.analysis.ast_context import AstContext
from gpulint.core.arguments import positional_args
from gpulint.core.context import FileContext
from gpulint.core.names import dotted
from gpulint.core.torch_api import FRAMEWORKS, not_an_optimizer_name, optimizer_name
from gpulint.core.values import single_value
from gpulint.core.walk import walk
from gpulint.records import dataclass

# names under which an unseen context manager may well be autocast
_LOOKS_LIKE_AMP = re.compile(r"autocast|(?<![a-z])amp|ctx|context|precision|mixed", re.IGNORECASE)
# context managers known not to be autocast
_KNOWN_CONTEXTS = ("torch.", "contextlib.", "builtins.", "tqdm.", "time.", "threading.", "warnings.")
StepNode = Union[cst.For, cst.While, cst.FunctionDef]
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)


@dataclass(frozen=True)
class Backward:
    call: cst.Call  # the call reported: `loss.backward()`, `torch.autograd.backward(loss)`
    loss: cst.BaseExpression  # the tensor whose gradients are computed
    scaled: bool  # goes through `scaler.scale(...)`
    autograd: bool  # the `torch.autograd.backward(loss)` spelling


@dataclass(frozen=True)
class OptimizerStep:
    call: cst.Call
    optimizer: cst.BaseExpression
    via_scaler: bool  # `scaler.step(opt)`


@dataclass
class TrainingStep:
    node: StepNode = field(repr=False)  # the loop, or the function for a step without a loop
    backwards: list[Backward] = field(default_factory=list, repr=False)
    steps: list[OptimizerStep] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class AutocastCover:
    coverage: Coverage
    # the autocast calls (or decorator expressions) that apply, when COVERED
    calls: tuple[cst.BaseExpression, ...] = ()


class _Index(cst.CSTVisitor):
    """Parents, document order, and the calls the analysis looks at, in one walk."""

    def __init__(self, facts: "TrainingFacts") -> None:
        self.facts = facts
        self.stack: list[cst.CSTNode] = []
        self.counter = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.facts.parents[id(node)] = self.stack[-1]
        self.facts.order[id(node)] = self.counter
        self.counter += 1
        self.stack.append(node)
        if isinstance(node, cst.Call):
            self.facts.calls.append(node)
        elif isinstance(node, (cst.Name, cst.Attribute)):
            name = node.value if isinstance(node, cst.Name) else node.attr.value
            if "autocast" in name.lower():
                self.facts.mentions_autocast = True
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.facts.ends[id(original_node)] = self.counter  # the order numbers below it end here
        self.stack.pop()


class TrainingFacts:
    """Training steps of one file, and the tree facts the AMP rules and fixes need."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.parents: dict[int, cst.CSTNode] = {}
        self.order: dict[int, int] = {}
        self.ends: dict[int, int] = {}  # per node: one past the order number of its last descendant
        self.calls: list[cst.Call] = []
        self.mentions_autocast = False
        walk(ctx.module, _Index(self))  # core/walk.py: a read-only walk, ~4x cheaper than visit
        self.framework_owned = self._imports_framework()
        self.steps: list[TrainingStep] = []
        self.by_backward: dict[int, tuple[TrainingStep, Backward]] = {}
        self._find_steps()

    # -- tree helpers ----------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Whether `outer` is an ancestor of `node`: its order number falls in `outer`'s subtree (the
        fix predictions ask this of every call for every step: walking up the parents each time made
        a 500-line module's lint quadratic)."""
        inner, start = self.order.get(id(node)), self.order.get(id(outer))
        return inner is not None and start is not None and start < inner < self.ends[id(outer)]

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The function, lambda, class or module whose code `node` is."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _SCOPES):
                return ancestor
        return self.ctx.module

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.BaseStatement]:
        """The innermost statement (simple line or compound) holding `node`."""
        current: Optional[cst.CSTNode] = node
        while current is not None:
            if isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return current
            current = self.parent(current)
        return None

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.order[id(a)] < self.order[id(b)]

    def value_at(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The value a name holds where it is read: its one assignment, or the last plain assignment
        before the read whose block also holds the read (`ds = load(); ds = ds.map(f); use(ds)`).
        None when a branch or a loop between them could leave another value, or when the name is also
        bound some other way (a parameter, `for ds in ...`)."""
        single = single_value(name, self.ctx.names)
        if single is not None:
            return single
        owner = self.ctx.names.binding_scope(name)
        if owner is None or id(name) not in self.order:
            return None
        targets = owner.bindings.get(name.value, [])
        values = owner.values.get(name.value, [])
        if any(t is not None for t in targets) or not values or any(v is None for v in values):
            return None
        # `x = f(x)`: the read inside the value sees the value before it
        earlier = [v for v in values if v is not None and id(v) in self.order and self.before(v, name)
                   and not self.contains(v, name)]
        if not earlier:
            return None
        last = earlier[-1]
        statement = self.statement_of(last)
        block = self.parent(statement) if statement is not None else None
        if block is None or not self.contains(block, name):
            return None
        for loop in self.ancestors(name):  # assigned again later in a loop around the read: not straight-line
            if isinstance(loop, (cst.For, cst.While)) and any(
                    v is not None and v is not last and self.contains(loop, v) and self.before(name, v)
                    for v in values):
                return None
            if loop is block:
                break
        return last

    # -- detection -------------------------------------------------------------
    def _imports_framework(self) -> bool:
        for targets in self.ctx.names.module_scope.bindings.values():
            for target in targets:
                if target and any(target == f or target.startswith(f + ".") for f in FRAMEWORKS):
                    return True
        return False

    def backward_of(self, call: cst.Call) -> Optional[Backward]:
        func = call.func
        if self.ctx.qualname(func) == "torch.autograd.backward":
            args = positional_args(call, ignore_starred=True)
            loss = args[0] if args else next(
                (a.value for a in call.args if a.keyword is not None and a.keyword.value == "tensors"), None)
            if loss is None:
                return None
            return Backward(call, loss, scaled=False, autograd=True)
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if positional_args(call, ignore_starred=True) or any(a.star for a in call.args):
                return None  # `accelerator.backward(loss)`, `fabric.backward(loss)`: the framework's own
            receiver = func.value
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) \
                    and receiver.func.attr.value == "scale" \
                    and len(positional_args(receiver, ignore_starred=True)) == 1:
                return Backward(call, positional_args(receiver, ignore_starred=True)[0], scaled=True, autograd=False)
            return Backward(call, receiver, scaled=False, autograd=False)
        return None

    def _is_scaler(self, expr: cst.BaseExpression) -> bool:
        name = dotted(expr)
        if name is None:
            return False
        if "scaler" in name.split(".")[-1].lower():
            return True
        value = single_value(expr, self.ctx.names) if isinstance(expr, cst.Name) else None
        return isinstance(value, cst.Call) and self.ctx.qualname(value.func) in ANY_GRAD_SCALER

    def _is_optimizer(self, expr: cst.BaseExpression) -> bool:
        name = dotted(expr)
        if name is None:
            return False
        if not_an_optimizer_name(name):
            return False
        if isinstance(expr, cst.Name):
            value = single_value(expr, self.ctx.names)
            if isinstance(value, cst.Call):
                target = self.ctx.qualname(value.func) or ""
                if target.startswith("torch.optim.lr_scheduler"):
                    return False
                if target.startswith("torch.optim."):
                    return True
        if optimizer_name(name):
            return True
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "zero_grad" and dotted(c.func.value) == name
            for c in self.calls
        )

    def optimizer_step_of(self, call: cst.Call) -> Optional[OptimizerStep]:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "step":
            return None
        args = positional_args(call, ignore_starred=True)
        if len(args) == 1 and self._is_scaler(func.value):
            return OptimizerStep(call, args[0], via_scaler=True)
        if len(args) <= 1 and self._is_optimizer(func.value):
            return OptimizerStep(call, func.value, via_scaler=False)
        return None

    def _lightning_method(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return any("LightningModule" in self.ctx.code(base.value) for base in ancestor.bases)
        return False

    def _find_steps(self) -> None:
        backwards = [b for b in map(self.backward_of, self.calls) if b is not None]
        if not backwards:
            return
        steps = [s for s in map(self.optimizer_step_of, self.calls) if s is not None]
        by_node: dict[int, TrainingStep] = {}
        for backward in backwards:
            if self._lightning_method(backward.call):
                continue
            node = self._step_node(backward.call, steps)
            if node is None:
                continue
            step = by_node.get(id(node))
            if step is None:
                step = by_node[id(node)] = TrainingStep(node)
                step.steps = [s for s in steps if self._inside_same_code(node, s.call)]
                self.steps.append(step)
            step.backwards.append(backward)
            self.by_backward[id(backward.call)] = (step, backward)

    def _inside_same_code(self, node: StepNode, call: cst.Call) -> bool:
        if not self.contains(node, call):
            return False
        scope = self.scope_of(call)
        return scope is node if isinstance(node, cst.FunctionDef) else scope is self.scope_of(node)

    def _step_node(self, call: cst.Call, steps: list[OptimizerStep]) -> Optional[StepNode]:
        for ancestor in self.ancestors(call):
            if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
                if any(self._inside_same_code(ancestor, s.call) for s in steps):
                    return ancestor
            if isinstance(ancestor, _SCOPES):
                return None
        return None

    # -- autocast coverage -----------------------------------------------------
    def autocast_in(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """Autocast calls (or bare autocast references) inside an expression."""
        found: list[cst.BaseExpression] = []
        names = self.ctx.names

        class _Find(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                if names.qualified_name(node.func) in ANY_AUTOCAST:
                    found.append(node)

        walk(expr, _Find())
        if not found and names.qualified_name(expr) in ANY_AUTOCAST:
            found.append(expr)
        return found

    def _with_autocasts(self, item: cst.BaseExpression) -> tuple[list[cst.BaseExpression], bool]:
        """Autocast calls a `with` item provably enters, and whether it might enter one unseen."""
        direct = self.autocast_in(item)
        if direct:
            return direct, True
        if isinstance(item, cst.Name):  # nanoGPT: `ctx = nullcontext() if cpu else torch.amp.autocast(...)`
            owner = self.ctx.names.binding_scope(item)
            if owner is not None:
                found = [c for v in owner.values.get(item.value, []) if v is not None for c in self.autocast_in(v)]
                if found:
                    return found, True
        return [], self._might_be_autocast(item, depth=0)

    def _might_be_autocast(self, expr: cst.BaseExpression, depth: int) -> bool:
        """A context manager whose definition the file does not show, with nothing ruling autocast out."""
        if depth > 3:
            return True
        if isinstance(expr, cst.IfExp):
            return any(self._might_be_autocast(e, depth + 1) for e in (expr.body, expr.orelse))
        if isinstance(expr, cst.Call):
            expr = expr.func
        if isinstance(expr, cst.Name):
            owner = self.ctx.names.binding_scope(expr)
            if owner is None:
                return False  # a builtin such as `open`
            target = self.ctx.qualname(expr)
            if target is not None:
                return not target.startswith(_KNOWN_CONTEXTS)
            values = owner.values.get(expr.value, [])
            plain = [v for v in values if v is not None]
            if values and len(plain) == len(values):
                return any(self.autocast_in(v) or self._might_be_autocast(v, depth + 1) for v in plain)
            local = [t for t in owner.bindings.get(expr.value, []) if t is None]
            if local and not any(values):  # a def or class of this file (it would mention autocast)
                return bool(_LOOKS_LIKE_AMP.search(expr.value))
        target = self.ctx.qualname(expr)
        if target is not None:
            return not target.startswith(_KNOWN_CONTEXTS)
        return bool(_LOOKS_LIKE_AMP.search(self.ctx.code(expr)))

    def coverage(self, node: cst.CSTNode) -> AutocastCover:
        """Whether `node` (a loss statement) runs under autocast, as far as the file shows."""
        maybe = False
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.With,)):
                for item in ancestor.items:
                    calls, looks_like = self._with_autocasts(item.item)
                    if calls:
                        return AutocastCover(Coverage.COVERED, tuple(calls))
                    maybe = maybe or looks_like
            if isinstance(ancestor, cst.FunctionDef):
                for decorator in ancestor.decorators:
                    calls = self.autocast_in(decorator.decorator)
                    if calls:
                        return AutocastCover(Coverage.COVERED, tuple(calls))
        if maybe or self.mentions_autocast:
            return AutocastCover(Coverage.UNKNOWN)
        return AutocastCover(Coverage.NOT_COVERED)


def training_facts(ctx: FileContext) -> TrainingFacts:
    """The shared analysis (use through `ctx.analysis(training_facts)`)."""
    return TrainingFacts(ctx)


def training_step_of(ctx: FileContext, backward: cst.Call) -> Optional[tuple[TrainingFacts, TrainingStep, Backward]]:
    """The training step a backward call belongs to; None outside a step, or where a framework owns the loop."""
    facts = ctx.analysis(training_facts)
    entry = facts.by_backward.get(id(backward))
    if entry is None or facts.framework_owned:
        return None
    return facts, entry[0], entry[1]


def libcst_backward(ctx: AstContext, call: ast.Call) -> Optional[tuple[TrainingFacts, TrainingStep, Backward]]:
    """The LibCST training step at a backward call an `ast` rule found (analysis/amp_steps.py), for the fixes
    of GPU001/GPU002, which edit LibCST: both trees see the same backward calls in the same order (the same
    tests on each; tests/analysis/test_amp_steps.py pins the steps as equal), matched by position and code.
    None where they differ, or where LibCST cannot parse the file."""
    fctx = ctx.libcst()
    if fctx is None:
        return None
    facts = fctx.analysis(training_facts)
    steps = ctx.analysis(amp_steps)
    ours = [c for c in steps.calls if steps.backward_of(c) is not None]
    theirs = [c for c in facts.calls if facts.backward_of(c) is not None]
    index = next((i for i, c in enumerate(ours) if c is call), None)
    if index is None or len(ours) != len(theirs) or fctx.code(theirs[index]) != ctx.segment(call):
        return None
    return training_step_of(fctx, theirs[index])
