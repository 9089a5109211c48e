"""Training steps as the mixed-precision rules and fixes see them, on CPython's `ast` (issue 25).

analysis/training.py (LibCST) finds the training steps GPU001/GPU002 rewrite: a backward call on a loss
and an optimizer step in the same code, the step being the innermost loop holding both, or failing that
the function (`def train_step(batch): ...; loss.backward(); opt.step()`). analysis/steps.py answers a
different question (the loops that run one step per iteration, also through calls), so GPU201's "does
GPU001/GPU002's float16 fix add a GradScaler here?" is asked of this port of the LibCST step finding:
the same backward and step tests, the same step node, the same framework test, without parsing LibCST.
GPU001, GPU002, GPU401, GPU404 and GPU004 read these steps (with analysis/amp_regions.py for their loss and
autocast); training.py's stays for GPU001/GPU002's fixes, which edit LibCST (`training.libcst_backward`).
"""

from __future__ import annotations

import ast
from typing import Optional, Union

from gpulint.analysis.amp import ANY_GRAD_SCALER
from gpulint.analysis.ast_context import CODE_SCOPES, AstContext, dotted
from gpulint.analysis.ast_values import single_value
from gpulint.core.torch_api import AUTOGRAD_BACKWARD, FRAMEWORKS, not_an_optimizer_name, optimizer_name
from gpulint.records import dataclass

# what a training step spells, as `Rule.ast_needles`: a backward call and an optimizer step
TRAINING_STEP_NEEDLES = ((".backward(", "torch.autograd.backward"), (".step(",))
StepNode = Union[ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef]
_STEP_NODES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class AmpBackward:
    call: ast.Call  # `loss.backward()`, `torch.autograd.backward(loss)`
    loss: ast.expr  # the tensor whose gradients are computed
    scaled: bool  # goes through `scaler.scale(...)`
    step: StepNode  # the loop (or function) that is the training step


@dataclass(frozen=True)
class AmpOptimizerStep:
    call: ast.Call
    optimizer: ast.expr
    via_scaler: bool  # `scaler.step(opt)`


@dataclass
class AmpStep:
    """One training step: the loop (or function) and its backward calls and optimizer steps, in source order."""

    node: StepNode
    backwards: list[AmpBackward]
    steps: list[AmpOptimizerStep]


class AmpSteps:
    """The backward calls of a file that belong to a training step, as analysis/training.py finds them."""

    def __init__(self, ctx: AstContext) -> None:
        self.ctx = ctx
        self.calls = [c for c in ctx.nodes(ast.Call) if isinstance(c, ast.Call)]
        self.framework_owned = imports_framework(ctx)
        self._zero_grad = {dotted(c.func.value) for c in self.calls
                           if isinstance(c.func, ast.Attribute) and c.func.attr == "zero_grad"} - {None}
        self.backwards: list[AmpBackward] = []
        self.steps: list[AmpStep] = []
        self._find()

    def _find(self) -> None:
        found = [(c, b) for c in self.calls for b in [self.backward_of(c)] if b is not None]
        if not found:
            return
        steps = [s for s in map(self.optimizer_step_of, self.calls) if s is not None]
        step_calls = [s.call for s in steps]  # in source order, as the calls: sliced per subtree
        by_node: dict[int, AmpStep] = {}
        for call, (loss, scaled) in found:
            if self._lightning_method(call):
                continue
            node = self._step_node(call, step_calls)
            if node is None:
                continue
            backward = AmpBackward(call, loss, scaled, node)
            self.backwards.append(backward)
            step = by_node.get(id(node))
            if step is None:
                start, stop = self.ctx.span_in(step_calls, node)
                step = by_node[id(node)] = AmpStep(node, [], [s for s in steps[start:stop]
                                                              if self._inside_same_code(node, s.call)])
                self.steps.append(step)
            step.backwards.append(backward)

    # -- the calls ---------------------------------------------------------------------------------
    def backward_of(self, call: ast.Call) -> Optional[tuple[ast.expr, bool]]:
        """(loss, scaled) for a backward pass; None for anything else (a framework's `backward(loss)`)."""
        func = call.func
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        if self.ctx.qualname(func) == AUTOGRAD_BACKWARD:
            loss = positional[0] if positional else next((k.value for k in call.keywords if k.arg == "tensors"), None)
            return (loss, False) if loss is not None else None
        if isinstance(func, ast.Attribute) and func.attr == "backward":
            if positional or len(positional) != len(call.args) or any(k.arg is None for k in call.keywords):
                return None  # `accelerator.backward(loss)`, `fabric.backward(loss)`: the framework's own
            receiver = func.value
            if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
                    and receiver.func.attr == "scale":
                scaled = [a for a in receiver.args if not isinstance(a, ast.Starred)]
                if len(scaled) == 1:
                    return scaled[0], True
            return receiver, False
        return None

    def optimizer_step_of(self, call: ast.Call) -> Optional[AmpOptimizerStep]:
        """`opt.step()`, `scaler.step(opt)`."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "step":
            return None
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        if len(positional) == 1 and self._is_scaler(func.value):
            return AmpOptimizerStep(call, positional[0], True)
        if len(positional) <= 1 and self._is_optimizer(func.value):
            return AmpOptimizerStep(call, func.value, False)
        return None

    def _is_scaler(self, expr: ast.expr) -> bool:
        name = dotted(expr)
        if name is None:
            return False
        if "scaler" in name.split(".")[-1].lower():
            return True
        value = single_value(expr, self.ctx.names) if isinstance(expr, ast.Name) else None
        return isinstance(value, ast.Call) and self.ctx.qualname(value.func) in ANY_GRAD_SCALER

    def _is_optimizer(self, expr: ast.expr) -> bool:
        name = dotted(expr)
        if name is None:
            return False
        if not_an_optimizer_name(name):
            return False
        if isinstance(expr, ast.Name):
            value = single_value(expr, self.ctx.names)
            if isinstance(value, ast.Call):
                target = self.ctx.qualname(value.func) or ""
                if target.startswith("torch.optim.lr_scheduler"):
                    return False
                if target.startswith("torch.optim."):
                    return True
        if optimizer_name(name):
            return True
        return name in self._zero_grad

    # -- where the step is -------------------------------------------------------------------------
    def _lightning_method(self, node: ast.AST) -> bool:
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, ast.ClassDef):
                return any("LightningModule" in self.ctx.segment(base) for base in ancestor.bases)
        return False

    def _inside_same_code(self, node: StepNode, call: ast.Call) -> bool:
        if not self.ctx.within(call, node):
            return False
        scope = self.ctx.code_scope(call)
        return scope is node if isinstance(node, _FUNCTIONS) else scope is self.ctx.code_scope(node)

    def _step_node(self, call: ast.Call, steps: list[ast.Call]) -> Optional[StepNode]:
        """The innermost loop, or the function, around `call` whose own code also steps an optimizer."""
        for ancestor in self.ctx.ancestors(call):
            if isinstance(ancestor, _STEP_NODES):
                start, stop = self.ctx.span_in(steps, ancestor)
                if any(self._inside_same_code(ancestor, s) for s in steps[start:stop]):
                    return ancestor
            if isinstance(ancestor, CODE_SCOPES):
                return None
        return None

    @property
    def unscaled(self) -> bool:
        """A training step's backward goes without a GradScaler, and no framework owns the loop: where
        GPU001/GPU002's float16 fix adds a GradScaler."""
        return not self.framework_owned and any(not b.scaled for b in self.backwards)


def imports_framework(ctx: AstContext) -> bool:
    """The module imports a framework that runs the loop and owns precision (Accelerate, Lightning, ...)."""
    for targets in ctx.names.module_scope.bindings.values():
        for target in targets:
            if target and any(target == f or target.startswith(f + ".") for f in FRAMEWORKS):
                return True
    return False


def amp_steps(ctx: AstContext) -> AmpSteps:
    """The shared analysis: `ctx.analysis(amp_steps)`."""
    return AmpSteps(ctx)
