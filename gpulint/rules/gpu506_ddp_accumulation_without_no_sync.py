"""GPU506 ddp-accumulation-without-no-sync: DDP all-reduces gradients on every accumulation micro-step."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Optional, Union

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.steps import StepFacts, StepLoop, step_facts
from gpulint.core.edits import Applicability
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.records import dataclass
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                 "torch.nn.parallel.distributed.DistributedDataParallel"})

ACCUMULATES = Premise(
    "accumulates",
    "a training step loop of the file calls backward() on every iteration while every optimizer step in it "
    "runs only under a modulo condition (`if (i + 1) % accum == 0`): gradients accumulate over micro-steps.")
DDP_MODEL = Premise(
    "ddp-model",
    "the file wraps a model in `torch.nn.parallel.DistributedDataParallel` (not FSDP, whose own no_sync "
    "differs, nor DeepSpeed, whose engine accumulates by itself).")
SYNCS_EVERY_MICRO_STEP = Premise(
    "syncs-every-micro-step",
    "nothing in the file skips the gradient all-reduce: no `no_sync()` and no `require_backward_grad_sync`.")


class DdpAccumulationWithoutNoSync(Rule):
    code = "GPU506"
    name = "ddp-accumulation-without-no-sync"
    summary = "DDP gradient accumulation that all-reduces on every micro-step (no model.no_sync())"
    impact = "gradient communication cut by the accumulation factor (PyTorch Performance Tuning Guide)"
    needles = ("DistributedDataParallel",)
    ast_needles = (tuple(sorted(DDP)), (".backward(",))
    target = Target.GPU
    in_tests = False
    preview = True
    fix = Applicability.UNSAFE
    # verify runs one process: DDP on a single rank all-reduces with itself, so the losses are the same numbers
    verification = Verification(NEUTRAL, (), "no_sync() on the non-boundary micro-steps: with one process "
                                              "there is no all-reduce to skip")
    docs = RuleDocs(
        what="""
        Checks for training loops that accumulate gradients (backward on every iteration,
        the optimizer step under `if (i + 1) % accum == 0`) in a file that wraps its model
        in `DistributedDataParallel`, without `model.no_sync()` anywhere in the file.
        """,
        why="""
        DDP starts an all-reduce of every gradient bucket during each backward. With
        accumulation only the last micro-step's reduced gradients are used, so the others
        pay the whole communication for nothing; the PyTorch Performance Tuning Guide
        recommends `no_sync()` on the non-boundary micro-steps, which cuts gradient
        communication by the accumulation factor. Checked here with the fix's rewrite on
        the CPU (bench/ddp_no_sync_cpu.py: 2 gloo processes, 12 micro-steps, accumulation
        4): 12 bucket all-reduces became 3, and the trained parameters stayed within
        1.5e-08 of the original's.
        """,
        example="""
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(Net().cuda(rank), device_ids=[rank])
        for i, (x, y) in enumerate(loader):
            loss = model(x.cuda(rank)).sub(y.cuda(rank)).pow(2).mean() / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        use_instead="""
        import contextlib

        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(Net().cuda(rank), device_ids=[rank])
        for i, (x, y) in enumerate(loader):
            boundary = (i + 1) % accum == 0
            with contextlib.nullcontext() if boundary else model.no_sync():
                loss = model(x.cuda(rank)).sub(y.cuda(rank)).pow(2).mean() / accum
                loss.backward()
            if boundary:
                optimizer.step()
                optimizer.zero_grad()
        """,
        fix_safety="""
        Unsafe: the fix wraps the step loop's statements from the first call of the DDP model
        through the backward pass in `with contextlib.nullcontext() if <condition> else
        model.no_sync():`, where `<condition>` is the `if` of the optimizer step as written,
        so the forward pass (where DDP decides) and the backward of the boundary micro-step
        still synchronise (`import contextlib` is added unless the file already has
        `nullcontext`). With one process nothing changes; with several, the summed
        gradients are reduced once, which rounds differently from reducing each micro-step
        (1.5e-08 on the parameters in bench/ddp_no_sync_cpu.py).
        Offered only when all of it is visible in the loop's own body: one backward
        statement, the optimizer steps under one `if` after it, a condition that calls
        nothing but `len()` and reads no name that changes between the forward pass and
        that `if` (a counter incremented after the backward would move the boundary and
        leave the last micro-step unsynchronised), and a forward pass that calls a name
        every binding of which is the `DistributedDataParallel` wrapper (not a module
        wrapped only when distributed, nor one passed in as a parameter); otherwise the
        finding says why no fix is offered. Not reported for FSDP or DeepSpeed, when the
        file mentions `no_sync` or `require_backward_grad_sync`, when the model is wrapped
        in another file, where a framework owns the loop, in CPU-only files or in test
        files.
        """,
        premises=(ACCUMULATES, DDP_MODEL, SYNCS_EVERY_MICRO_STEP),
        fix_cases=(
            FixCase("forward and backward of the accumulation micro-steps wrapped in `contextlib.nullcontext() if "
                    "<the optimizer step's condition> else model.no_sync()` (preview)",
                    Applicability.UNSAFE, "accumulation_without_no_sync.py"),
            FixCase("the condition's counter changes after the backward pass, the forward runs in a helper, the model"
                    " is DDP only when distributed",
                    None, "counter_changes_before_step_no_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        if not any(isinstance(c, ast.Call) and ctx.names.qualname(c.func) in DDP for c in ctx.nodes(ast.Call)):
            return
        steps = ctx.analysis(step_facts)
        synced = any(isinstance(a, ast.Attribute) and a.attr in ("no_sync", "require_backward_grad_sync")
                     for a in ctx.nodes(ast.Attribute))  # read from code, not comments
        for step in steps.steps:
            if step.framework_owned or not step.backwards or not step.steps:
                continue
            if not _accumulates(steps, step.backwards[0].call, [s.call for s in step.steps]):
                continue
            decision = self.decide({ACCUMULATES: SHOWN, DDP_MODEL: SHOWN,
                                    SYNCS_EVERY_MICRO_STEP: REFUTED if synced else SHOWN})
            if not decision.report:
                continue
            plan = _plan_fix(ctx, steps, step)
            fix: Optional[Applicability] = None
            fix_message, note, data = "", "", None
            if isinstance(plan, str):
                note = f"no fix: {plan}"
            else:
                fix, data = Applicability.UNSAFE, {"first": plan.first, "last": plan.last, "condition": plan.condition,
                                                   "model": plan.model}
                fix_message = f"Run the non-boundary micro-steps' forward and backward under `{plan.model}.no_sync()`"
            ctx.report(self, step.backwards[0].call, "DDP all-reduces gradients on every accumulation micro-step: "
                                                     "run the non-boundary ones under model.no_sync()",
                       fix=fix, fix_message=fix_message, data=data, note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.walk import descendants

        if detection.data is None:
            return None
        first, last = detection.data["first"], detection.data["last"]
        loop = next((n for n in descendants(fctx.module) if isinstance(n, (cst.For, cst.While))
                     and isinstance(n.body, cst.IndentedBlock) and len(n.body.body) > last
                     and _holds(n.body.body[last], node)), None)
        if loop is None:
            return None
        null = fctx.imports.reference("contextlib", "nullcontext")
        body: list[Any] = list(loop.body.body)
        wrapped: list[Any] = body[first:last + 1]  # statements: each has leading_lines
        context = cst.parse_expression(f"{null.expr}() if {detection.data['condition']} else "
                                       f"{detection.data['model']}.no_sync()")
        block = cst.With(items=[cst.WithItem(item=context)],
                         body=cst.IndentedBlock(body=[wrapped[0].with_changes(leading_lines=()), *wrapped[1:]]),
                         leading_lines=wrapped[0].leading_lines)
        new_body = [*body[:first], block, *body[last + 1:]]
        new_loop = loop.with_changes(body=loop.body.with_changes(body=new_body))
        return PendingFix.unsafe(detection.fix_message, Replace(loop, new_loop), null.edit)


def _accumulates(steps: StepFacts, backward: ast.Call, optimizer_steps: list[ast.Call]) -> bool:
    """Backward on every iteration; every optimizer step under a modulo condition."""
    place = steps.place(backward)
    if place is None or not place.every_step:
        return False
    for call in optimizer_steps:
        where = steps.place(call)
        if where is None or where.every_step or where.condition is None:
            return False
        if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in walk_nodes(where.condition)):
            return False
    return True


# -- the fix ---------------------------------------------------------------------------------------------
# what a boundary condition may be made of to be evaluated once more, earlier in the iteration, to the same value
_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Load,
         ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


@dataclass(frozen=True)
class _Plan:
    first: int  # index in the step loop's body of the first statement to wrap (the forward's)
    last: int  # ... and of the last (the backward's)
    condition: str  # the optimizer step's condition, as written
    model: str  # the DDP model, as the forward call spells it


def _plan_fix(ctx: AstContext, steps: StepFacts, step: StepLoop) -> Union[_Plan, str]:
    """Which statements of the step loop to wrap in `nullcontext() if <boundary> else model.no_sync()`, or why
    no fix is offered."""
    loop = step.loop
    if isinstance(loop, ast.AsyncFor) or len(step.backwards) != 1:
        return "the loop has more than one backward pass"
    backward = ctx.statement(step.backwards[0].call)
    if ctx.parent(backward) is not loop or backward not in loop.body:
        return "the backward pass is not a statement of the training loop's own body"
    last = loop.body.index(backward)
    conditions = {ast.dump(where.condition) for s in step.steps if (where := steps.place(s.call)) is not None
                  and where.condition is not None}
    branch = next((s for s in loop.body[last + 1:] if isinstance(s, ast.If)
                   and any(ast.dump(s.test) == c for c in conditions)), None)
    if len(conditions) != 1 or branch is None:
        return "the optimizer steps are not under one `if` that follows the backward pass in the loop's body"
    condition = branch.test
    if not all(isinstance(n, _PURE) or _is_len(n) for n in walk_nodes(condition)):
        return "the accumulation condition calls something: it cannot be evaluated again before the forward pass"
    models, sometimes = _ddp_names(ctx)
    forwards = [(i, n) for i, s in enumerate(loop.body) for n in walk_nodes(s) if isinstance(n, ast.Call)
                and _dotted(n.func) in models]
    if not forwards:
        maybe = sorted({name for s in loop.body for n in walk_nodes(s) if isinstance(n, ast.Call)
                        and (name := _dotted(n.func)) in sometimes})
        if maybe:
            return f"`{maybe[0]}` is not always the DDP wrapper (a plain module has no no_sync())"
        return "the training loop does not call the DDP model itself (the forward pass runs elsewhere)"
    called = {_dotted(n.func) for _, n in forwards}
    if len(called) != 1:
        return "the training loop calls more than one DDP model"
    first = min(i for i, _ in forwards)
    if any(i > last for i, _ in forwards):
        return "the DDP model is also called after the backward pass"
    model = called.pop()
    assert model is not None
    read = {n.id for n in walk_nodes(condition) if isinstance(n, ast.Name)}
    between = loop.body[first:loop.body.index(branch)]
    for statement in between:
        for n in walk_nodes(statement):
            if isinstance(n, ast.Name) and n.id in read and not isinstance(n.ctx, ast.Load):
                return f"`{n.id}` changes between the forward pass and the optimizer step's condition"
            if isinstance(n, (ast.Global, ast.Nonlocal)) or (isinstance(n, ast.Call) and _mutates(n, read)):
                return "the optimizer step's condition may change between the forward pass and the step"
    rows: set[int] = set()
    for statement in loop.body[first:last + 1]:
        if statement.lineno in rows:
            return "statements share a line"
        rows.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    text = ctx.segment(condition)
    if "\n" in text or "\r" in text:  # a file may end its lines with a lone CR
        text = ast.unparse(condition)  # on one line: the fix's layout breaks it where the file's width needs
    return _Plan(first, last, text, model)


def _is_len(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
        and len(node.args) == 1 and not node.keywords


def _mutates(call: ast.Call, names: set[str]) -> bool:
    """A method call on a name the condition reads (`counter.update()`)."""
    base = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(base, ast.Attribute):
        base = base.value
    return isinstance(base, ast.Name) and base.id in names


def _ddp_names(ctx: AstContext) -> tuple[set[str], set[str]]:
    """The names (`model`, `self.model`) every binding of which, in the file, is a DistributedDataParallel; and
    those some other binding of which is not."""
    wrapped: dict[str, bool] = {}
    some: set[str] = set()
    for node in ctx.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
        value = node.value  # type: ignore[attr-defined]
        is_ddp = isinstance(value, ast.Call) and ctx.names.qualname(value.func) in DDP \
            and not isinstance(node, ast.AugAssign)
        for target in targets:
            for each in (target.elts if isinstance(target, ast.Tuple) else [target]):
                name = _dotted(each)
                if name is not None:
                    wrapped[name] = wrapped.get(name, True) and is_ddp and each is target
                    if is_ddp:
                        some.add(name)
    for node in ctx.nodes(ast.arg, ast.For, ast.With, ast.NamedExpr):
        names: list[str] = []
        if isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.For):
            names = [n for n in map(_dotted, walk_nodes(node.target)) if n is not None]
        elif isinstance(node, ast.With):
            names = [n for item in node.items if item.optional_vars is not None
                     for n in map(_dotted, walk_nodes(item.optional_vars)) if n is not None]
        elif isinstance(node, ast.NamedExpr):
            names = [node.target.id]
        for name in names:
            wrapped[name] = False
    always = {name for name, ddp in wrapped.items() if ddp}
    return always, some - always


def _dotted(expr: ast.AST) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr}" if base is not None else None
    return None


def _holds(root: "cst.CSTNode", node: "cst.CSTNode") -> bool:
    from gpulint.core.walk import descendants

    return any(each is node for each in descendants(root))

