"""GPU507 per-parameter-python-loop: an EMA/momentum update written as a Python loop over parameters."""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.steps import step_facts
from gpulint.rules.base import Rule, RuleDocs, Target

# in-place elementwise tensor methods: each call is at least one kernel launch per parameter
IN_PLACE = frozenset({"mul_", "add_", "sub_", "div_", "lerp_", "copy_", "addcmul_", "addcdiv_"})
_ITERATED = frozenset({"parameters", "values"})  # `model.parameters()`, `ema.state_dict().values()`

ELEMENTWISE_LOOP = Premise(
    "elementwise-loop",
    "a `for` loop over `zip(a.parameters(), b.parameters())` (or `state_dict().values()`) whose body only "
    "applies in-place elementwise tensor methods (`mul_`, `add_`, `lerp_`, `copy_`...) to the loop's "
    "variables (or their `.data`), optionally under `torch.no_grad()`: a per-parameter update that "
    "`torch._foreach_*` does on the whole list.")
EVERY_STEP = Premise(
    "every-step",
    "the loop runs on every training step: inside a step loop, or in a same-file function the step calls, "
    "not under a logging-interval or once-only condition.")
ON_CUDA = Premise(
    "on-cuda",
    "the parameters live on a CUDA GPU, where each tensor operation is a kernel launch: CUDA evidence in "
    "the file or a caller.")


class PerParameterPythonLoop(Rule):
    code = "GPU507"
    name = "per-parameter-python-loop"
    habit = "fused-kernels"
    summary = "EMA/momentum update as a Python loop over parameters, every step (torch._foreach_* does it at once)"
    impact = ("160 parameters, 64x64: 6.0 ms -> 0.49 ms per update with torch._foreach_lerp_ on a shared 2-core "
              "CPU (measured here); on a GPU each op per parameter is a kernel launch")
    needles = ("parameters", "state_dict")
    ast_needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    target = Target.GPU
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for loops over the parameters of two models (`zip(ema.parameters(),
        model.parameters())`, or their `state_dict().values()`) whose body only applies
        in-place elementwise tensor methods to them (`p_ema.mul_(d).add_(p, alpha=1 - d)`,
        `lerp_`, `copy_`), when the loop runs on every training step of a CUDA script.
        """,
        why="""
        Each tensor method call in the loop is a separate kernel launch (and Python dispatch)
        per parameter: a ResNet-50 EMA update is 161 parameters x 2 launches every step.
        `torch._foreach_*` functions take the whole list and launch a few fused kernels. On a
        CPU here, an EMA over 160 64x64 parameters took 6.0 ms as a Python loop and 0.49 ms
        with `torch._foreach_lerp_` (shared 2-core machine; the ratio, not the times, is the
        point). Optimizers use the same multi-tensor path by default on CUDA.
        """,
        example="""
        import torch

        model = Net().cuda()
        ema = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        for x, y in loader:
            loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for p_ema, p in zip(ema.parameters(), model.parameters()):
                    p_ema.mul_(0.999).add_(p, alpha=0.001)
        """,
        use_instead="""
        import torch

        model = Net().cuda()
        ema = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        ema_params, params = list(ema.parameters()), list(model.parameters())
        for x, y in loader:
            loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                torch._foreach_lerp_(ema_params, params, 0.001)
        """,
        fix_safety="""
        No fix: `torch._foreach_*` is a private API (present in the torch releases read for
        the facts doc, 2.x; `_foreach_lerp_` rounds differently from `mul_` then `add_`), the
        lists must be built once outside the step, and `state_dict().values()` also holds
        integer buffers (BatchNorm's `num_batches_tracked`) that `lerp_` rejects. Not
        reported for loops that do anything but elementwise updates (conditions, reads of
        `.grad`, assignments), loops under a logging-interval condition, where a framework
        owns the loop, in CPU-only files or in test files.
        """,
        premises=(ELEMENTWISE_LOOP, EVERY_STEP, ON_CUDA),
    )

    def detect(self, ctx: AstContext) -> None:
        steps = None
        for loop in ctx.nodes(ast.For):
            assert isinstance(loop, ast.For)
            names = _zipped_parameters(loop)
            if names is None or not _only_elementwise(loop.body, names, ctx):
                continue
            if steps is None:
                steps = ctx.analysis(step_facts)
            place = steps.place(loop)
            if place is None or place.step.framework_owned:
                continue
            decision = self.decide({
                ELEMENTWISE_LOOP: SHOWN,
                EVERY_STEP: SHOWN if place.every_step else REFUTED,
                ON_CUDA: cuda_evidence(ctx.project),
            })
            ctx.report(self, loop.iter, "per-parameter Python loop every step: one kernel launch per parameter "
                                        "and op; torch._foreach_* updates the list at once",
                       statement=loop, decision=decision)


def _zipped_parameters(loop: ast.For) -> Optional[set[str]]:
    """The loop variables of `for a, b in zip(x.parameters(), y.parameters())` (two or more iterables, each a
    `.parameters()` or `.values()` call); None for any other loop."""
    it, target = loop.iter, loop.target
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip"
            and len(it.args) >= 2 and not it.keywords):
        return None
    for argument in it.args:
        if not (isinstance(argument, ast.Call) and isinstance(argument.func, ast.Attribute)
                and argument.func.attr in _ITERATED and not argument.args):
            return None
    if not isinstance(target, ast.Tuple) or len(target.elts) != len(it.args):
        return None
    if not all(isinstance(e, ast.Name) for e in target.elts):
        return None
    return {e.id for e in target.elts}  # type: ignore[attr-defined]


def _only_elementwise(body: list[ast.stmt], names: set[str], ctx: AstContext) -> bool:
    """Every statement is `v.op_(...)[.op_(...)]` on a loop variable (or `v.data`), or a `with torch.no_grad()`
    holding only such statements."""
    if not body:
        return False
    for statement in body:
        if isinstance(statement, ast.With):
            if not all(isinstance(item.context_expr, ast.Call) and ctx.names.qualname(item.context_expr.func) in (
                    "torch.no_grad", "torch.inference_mode") for item in statement.items):
                return False
            if not _only_elementwise(statement.body, names, ctx):
                return False
            continue
        if not isinstance(statement, ast.Expr) or not _elementwise_chain(statement.value, names):
            return False
    return True


def _elementwise_chain(expr: ast.expr, names: set[str]) -> bool:
    """`p_ema.mul_(d).add_(p, alpha=1 - d)`, `p_ema.data.lerp_(p.data, w)`: in-place methods on a loop
    variable, whose arguments read nothing but the loop variables, constants and plain names."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in IN_PLACE:
        for argument in (*expr.args, *(k.value for k in expr.keywords)):
            if any(isinstance(n, ast.Call) for n in ast.walk(argument)):
                return False  # a call per parameter (`.grad`, `.float()`...) is more than an elementwise update
        expr = expr.func.value
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in names
