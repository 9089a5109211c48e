"""GPU202 fused-sgd-with-grad-scaler: fused SGD with momentum whose step a GradScaler drives."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, arg
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of, any_of
from gpulint.analysis.holders import held_values
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import GRAD_SCALER_ENABLED_POSITION, GRAD_SCALERS, SGD, SGD_MOMENTUM
from gpulint.core.verification import FUSED_OPTIMIZER, Verification
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.ast_context import Detection
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

FUSED_MOMENTUM = Premise(
    "fused-momentum-sgd",
    "the call builds torch's SGD (through any import alias) with `fused=True` and a momentum above zero, "
    "passed by keyword, as the third positional argument or in a `**dict` built in view; a literal, or a "
    "name assigned only literals. Refuted by no momentum (the default 0: no buffer) and by fused False/None.")
SCALED_STEP = Premise(
    "scaled-step",
    "a GradScaler steps this optimizer: `scaler.step(opt)` where `scaler` holds a GradScaler call not "
    "disabled with a literal `enabled=False`, and `opt` holds this SGD call (a name, `self.x`, or a "
    "parameter of a function of the file that every call passes it to).")

_MESSAGE = ("fused SGD with momentum stepped by a GradScaler: a skipped first step leaves the momentum "
            "buffer uninitialised")


class FusedSgdWithGradScaler(Rule):
    code = "GPU202"
    name = "fused-sgd-with-grad-scaler"
    habit = "fused-optimizers"
    summary = "fused SGD with momentum stepped by a GradScaler (garbage momentum after a skipped first step)"
    impact = "weights 0.125 -> 2e29..inf one step after a skipped first step (torch 2.13 CPU, measured)"
    needles = ("SGD",)
    ast_needles = (tuple(sorted(SGD)), (".step(",))
    target = Target.ANY
    in_tests = False
    preview = True
    fix = Applicability.SAFE
    verification = Verification(
        FUSED_OPTIMIZER, ("optimizer",), "the optimizer built without fused=True steps",
        lambda kind, details: details.get("fused") is not True,
        mismatch_hint="where the original's scaled first step overflowed, its fused momentum buffer held garbage "
                      "and its loss is the wrong one: a mismatch there is the fix at work")
    docs = RuleDocs(
        what="""
        Checks for `torch.optim.SGD(..., momentum=m, fused=True)` with `m > 0` whose step a
        `GradScaler` drives (`scaler.step(optimizer)`), for any GradScaler (`torch.amp`,
        `torch.cuda.amp`, `ShardedGradScaler`). The optimizer and the scaler are followed
        through names, `self.x` attributes and the parameters of functions of the file they
        are passed to.
        """,
        why="""
        Fused SGD allocates its momentum buffers with `torch.empty_like` on its first step and
        tells the kernel to initialise them; when the GradScaler finds an inf/NaN gradient on that
        step, the kernel skips everything, the buffers stay uninitialised memory, and every later
        step adds that garbage to the weights. A GradScaler's first steps are exactly the ones
        that overflow: its initial scale (65536) is meant to be backed off. Measured on torch
        2.13 (CPU, `GradScaler("cpu")`, first loss made inf): the largest weight went from 0.125
        to 2e29, 3e29 or inf one step later, depending on what the memory held; unfused SGD
        stayed at 0.125 (bench/fused_sgd_scaler.py; the same bug was seen on CUDA with torch 2.11, LibreYOLO#771, and in
        torch 2.14's source). Fused Adam and AdamW keep zero-initialised state and are not affected.
        """,
        example="""
        import torch

        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        use_instead="""
        import torch

        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        fix_safety="""
        Safe: removing `fused=True` returns to torch's default implementation (foreach on CUDA,
        a loop elsewhere), which computes the same update and leaves skipped steps without
        effect; the step gets somewhat slower (one kernel per group of tensors instead of one
        fused kernel). No fix when `fused=True` comes from a `**dict` (other calls may share
        it): set it there. Not reported for SGD without momentum (no buffer), for a scaler
        built with `enabled=False`, when the step's optimizer or scaler cannot be followed to
        their construction in the file, nor in test functions.
        """,
        premises=(FUSED_MOMENTUM, SCALED_STEP),
        fix_cases=(
            FixCase("`fused=True` removed from SGD with momentum under a GradScaler (preview)",
                    Applicability.SAFE, "basic.py"),
            FixCase("`fused=True` comes from a `**dict` other calls may share",
                    None, "fused_from_a_splat_reported_without_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        steps = [c for c in ctx.nodes(ast.Call) if _scaler_step(ctx, c)]
        if not steps:
            return
        for call in ctx.nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if ctx.names.qualname(call.func) not in SGD:
                continue
            kwargs = ctx.kwargs(call)
            fused = _fused(kwargs.get("fused")) if "fused" in kwargs.explicit else \
                (UNDECIDED if kwargs.unknown else REFUTED)
            momentum_expr = arg(call, *SGD_MOMENTUM, kwargs)
            if momentum_expr is None:
                momentum = UNDECIDED if kwargs.unknown or _positional_hidden(call) else REFUTED
            else:
                momentum = _positive(ctx, momentum_expr)
            scaled = _stepped_by_scaler(ctx, call, steps)
            decision = self.decide({FUSED_MOMENTUM: all_of(fused, momentum), SCALED_STEP: scaled})
            writable = "fused" in kwargs.explicit and "fused" not in kwargs.from_splat
            ctx.report(self, call, _MESSAGE,
                       fix=Applicability.SAFE if writable else None,
                       fix_message="Remove `fused=True` (torch's default SGD initialises its momentum buffer)",
                       note="" if writable else "no fix: `fused=True` comes from a `**dict` other calls may "
                                                "share; remove it there",
                       decision=decision)

    def build_fix(self, detection: "Detection", fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import remove_keyword

        if detection.fix is None or not isinstance(node, cst.Call):
            return None
        return PendingFix.safe(detection.fix_message, Replace(node, remove_keyword(node, "fused")))


def _positional_hidden(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args)


def _fused(value: Optional[ast.expr]) -> Evidence:
    if isinstance(value, ast.Constant):
        return SHOWN if value.value is True else REFUTED  # False, None: the default implementations
    return UNDECIDED  # `fused=args.fused`: chosen at run time


def _number(expr: ast.expr) -> Optional[float]:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        inner = _number(expr.operand)
        return None if inner is None else (-inner if isinstance(expr.op, ast.USub) else inner)
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return float(expr.value)
    return None


def _positive(ctx: AstContext, expr: ast.expr) -> Evidence:
    """Momentum above zero: a literal, or a name every assignment of which is a literal."""
    values = held_values(ctx, expr) if isinstance(expr, ast.Name) else [expr]
    numbers = [_number(v) for v in values or ()]
    if not numbers or any(n is None for n in numbers):
        return UNDECIDED
    if all(n is not None and n > 0 for n in numbers):
        return SHOWN
    return REFUTED if all(n == 0 for n in numbers) else UNDECIDED


def _scaler_step(ctx: AstContext, call: ast.AST) -> bool:
    """`x.step(opt)` with one argument: a scaler's step (an optimizer's own step takes none or a closure)."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "step" \
        and len(call.args) == 1 and not isinstance(call.args[0], ast.Starred)


def _scaler_enabled(ctx: AstContext, scaler: ast.Call) -> Evidence:
    """A GradScaler call that is not disabled by a literal `enabled=False`."""
    name = ctx.names.qualname(scaler.func) or ""
    position = GRAD_SCALER_ENABLED_POSITION["cuda" if ".cuda." in name else "new"]
    enabled = arg(scaler, "enabled", position, ctx.kwargs(scaler))
    if isinstance(enabled, ast.Constant) and enabled.value is False:
        return REFUTED
    return SHOWN  # `enabled=use_amp`: the bug bites whenever the flag is on, which is what it is for


def _stepped_by_scaler(ctx: AstContext, sgd: ast.Call, steps: list[ast.AST]) -> Evidence:
    found: list[Evidence] = []
    for step in steps:
        assert isinstance(step, ast.Call) and isinstance(step.func, ast.Attribute)
        optimizers = held_values(ctx, step.args[0])
        if not optimizers or not any(v is sgd for v in optimizers):
            continue
        scalers = held_values(ctx, step.func.value)
        if not scalers:
            found.append(UNDECIDED)
            continue
        if not all(isinstance(s, ast.Call) and ctx.names.qualname(s.func) in GRAD_SCALERS for s in scalers):
            found.append(UNDECIDED if any(isinstance(s, ast.Call) and ctx.names.qualname(s.func) in GRAD_SCALERS
                                          for s in scalers) else REFUTED)
            continue
        found.append(any_of(*(_scaler_enabled(ctx, s) for s in scalers if isinstance(s, ast.Call))))
    if not found:
        return UNDECIDED  # the optimizer's steps are not in view
    return any_of(*found)
