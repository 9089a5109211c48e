"""GPU507 per-parameter-python-loop: an EMA/momentum update written as a Python loop over parameters."""

from __future__ import annotations

import ast
import io
import tokenize
from typing import TYPE_CHECKING, Optional, Union

from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, Premise
from gpulint.analysis.steps import step_facts
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import GRAD_OFF
from gpulint.core.verification import FUSED_KERNEL, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.records import dataclass
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

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
FOREACH_EXISTS = Premise(
    "foreach-exists",
    "the project's torch has the list operations the advice names (`torch._foreach_mul_`/`_foreach_add_` with "
    "`alpha=`, read at 1.13 in the floors table): refuted when the torch floor it declares is older (a "
    "`torch==1.0` pin: sweetice/Deep-reinforcement-learning-with-pytorch, the sixteenth blind reading, 5 NP).")
ON_CUDA = Premise(
    "on-cuda",
    "the parameters live on a CUDA GPU, where each tensor operation is a kernel launch: CUDA evidence in "
    "the file or a caller.")


class PerParameterPythonLoop(Rule):
    code = "GPU507"
    name = "per-parameter-python-loop"
    habit = "fused-kernels"
    summary = "EMA/momentum update as a Python loop over parameters, every step (torch._foreach_* does it at once)"
    impact = ("an EMA over 244 tensors: training step 5.3 -> 3.3 ms on one CPU thread (gpulint verify, "
              "tests/verify/scripts/ema_mlp.py); on a GPU each op per parameter is a kernel launch")
    needles = ("parameters", "state_dict")
    ast_needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    target = Target.GPU
    in_tests = False
    preview = True
    fix = Applicability.UNSAFE
    # on a CPU the foreach functions run the same per-tensor kernels as the loop (the loss is reproduced bit for
    # bit there); a GPU's fused multi-tensor kernels may round the last bits differently
    verification = Verification(FUSED_KERNEL, ("foreach",), "a torch._foreach_* call updates the list in the step")
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
        `torch._foreach_*` functions take the whole list and launch a few fused kernels. Even
        on a CPU, where they run one kernel per tensor, the Python loop costs: with
        bench/foreach_ema_cpu.py (160 and 244 tensors of an MLP of width 64, one thread,
        medians of 500 updates, three runs on a shared 2-core machine) a loop of `lerp_`
        took 0.32-0.77 ms and `_foreach_lerp_` 0.17-0.19 ms (2.5-4.5x), a loop of `mul_`
        then `add_` 0.86-1.32 ms and `_foreach_mul_` + `_foreach_add_` 1.25-1.9x less;
        an earlier session measured 6.0 ms against 0.49 ms for the loop and
        `_foreach_lerp_`. `gpulint verify --preview --select GPU507` on
        tests/verify/scripts/ema_mlp.py (an EMA over 244 tensors, most of its step)
        reproduces the losses bit for bit with a shorter step: 5.3 -> 3.3 ms (1.60x, 95% CI
        1.21-2.28x, 5 interleaved run pairs of 60 steps). Where both lists have one dtype,
        `torch._foreach_lerp_(ema_params, params, 0.001)` does the update in one pass.
        Optimizers use the same multi-tensor path by default on CUDA.
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
                torch._foreach_mul_(ema_params, 0.999)
                torch._foreach_add_(ema_params, params, alpha=0.001)
        """,
        fix_safety="""
        Unsafe: the fix replaces the loop with the same update on whole lists:
        `torch._foreach_lerp_(ema_params, model_params, w)` for `t.lerp_(s, w)` (torch 2.0 or
        newer), `torch._foreach_mul_` then `torch._foreach_add_` for
        `t.mul_(d).add_(s, alpha=a)` and `t.copy_(t * d + s * a)` (1.13), over lists built
        in its place from the same `parameters()`, `buffers()` or `state_dict().values()`
        calls (`[p.data for p in ...]` where the loop used `.data`), under the loop's own
        `torch.no_grad()`. A `mul_`/`add_` update is not turned into `lerp` even with `a = 1
        - d`: lerp wants both tensors of one dtype, and a float32 EMA of a bfloat16 model
        would make it raise. It is unsafe because `torch._foreach_*` is a private API;
        `copy_(t * d + s * a)` now rounds like `mul_` then `add_`, and CUDA's multi-tensor
        kernels may round the last bits differently; `zip` stopped at the shorter model where
        the foreach functions raise when the lists differ in length. Offered only when the
        loop body is exactly one such update, both iterables belong to named modules, the
        update runs under `torch.no_grad()`/`inference_mode()` (a `with` or a decorator) or
        on `.data` or `state_dict()` tensors, no loop variable is read after the loop, the
        loop holds no comment, and the project's torch floor has the functions; otherwise the
        finding says why no fix is offered. Not reported for loops that do anything but
        elementwise updates (conditions, reads of `.grad`, assignments), loops under a
        logging-interval condition, where a framework owns the loop, in CPU-only files, in
        test files, or where the project's torch floor is older than the list operations (1.13).
        """,
        premises=(ELEMENTWISE_LOOP, EVERY_STEP, ON_CUDA, FOREACH_EXISTS),
        fix_cases=(
            FixCase("a per-parameter `t.lerp_(s, w)` loop replaced by `torch._foreach_lerp_` over lists of the same "
                    "parameters (preview)",
                    Applicability.UNSAFE, "lerp_in_helper.py"),
            FixCase("`t.mul_(d).add_(s, alpha=a)` or `t.copy_(t * d + s * a)` per parameter: `torch._foreach_mul_` + "
                    "`torch._foreach_add_` (never lerp: it wants one dtype)",
                    Applicability.UNSAFE, "ema_update_every_step.py"),
            FixCase("the update not under `torch.no_grad()` nor on `.data`, a loop variable read after the loop, an "
                    "iterable not of a named module",
                    None, "grad_on_no_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        steps = None
        old_torch = floors.too_new(ctx.settings.torch_version, [floors.FOREACH_MUL_ADD]) is not None
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
                FOREACH_EXISTS: REFUTED if old_torch else SHOWN,
            })
            if not decision.report:
                continue
            plan = _plan_fix(ctx, loop)
            fix: Optional[Applicability] = None
            fix_message, note, data = "", "", None
            if isinstance(plan, str):
                note = f"no fix: {plan}"
            else:
                fix, fix_message, data = Applicability.UNSAFE, plan.message, {"code": plan.code}
            ctx.report(self, loop.iter, "per-parameter Python loop every step: one kernel launch per parameter "
                                        "and op; torch._foreach_* updates the list at once",
                       fix=fix, fix_message=fix_message, data=data, note=note, statement=loop, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.walk import descendants

        if detection.data is None:
            return None
        loop = next((n for n in descendants(fctx.module) if isinstance(n, cst.For) and n.iter is node), None)
        if loop is None:
            return None
        torch = fctx.imports.module_alias("torch")
        code = detection.data["code"].replace(_TORCH, torch.expr)
        statements = list(cst.parse_module(code).body)
        statements[0] = statements[0].with_changes(leading_lines=loop.leading_lines)  # the comments above
        return PendingFix.unsafe(detection.fix_message, Replace(loop, statements), torch.edit)


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
            if any(isinstance(n, ast.Call) for n in walk_nodes(argument)):
                return False  # a call per parameter (`.grad`, `.float()`...) is more than an elementwise update
        expr = expr.func.value
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in names


# -- the fix ---------------------------------------------------------------------------------------------
_TORCH = "__gpulint_torch__"  # stands for the file's torch alias until build_fix knows it
_LIST_SUFFIX = {"parameters": "params", "buffers": "buffers", "values": "state"}


@dataclass(frozen=True)
class _Plan:
    code: str  # the statements that replace the loop, unindented, torch spelt _TORCH
    message: str


@dataclass(frozen=True)
class _Op:
    """One in-place call of the update: `target.method(args)` (`.data` looked through)."""

    method: str
    target: str
    call: ast.Call


def _plan_fix(ctx: AstContext, loop: ast.For) -> Union[_Plan, str]:
    """The foreach statements that do what the loop does, or why none is offered."""
    it = loop.iter
    assert isinstance(it, ast.Call) and isinstance(loop.target, ast.Tuple)
    if len(it.args) != 2:
        return "the loop zips more than two lists"
    owners = [_owner(a) for a in it.args]
    if any(o is None for o in owners):
        return "an iterable is not `m.parameters()`, `m.buffers()` or `m.state_dict().values()` of a named module"
    variables = [e.id for e in loop.target.elts if isinstance(e, ast.Name)]
    body, contexts = loop.body, ""
    if len(body) == 1 and isinstance(body[0], ast.With):
        contexts = ", ".join(ctx.segment(item.context_expr) + (f" as {ctx.segment(item.optional_vars)}"
                                                               if item.optional_vars is not None else "")
                             for item in body[0].items)
        body = body[0].body
    ops: list[_Op] = []
    for statement in body:
        chain = _chain(statement.value) if isinstance(statement, ast.Expr) else None
        if chain is None:
            return "the loop body is not one update of one loop variable"
        ops += chain
    update = _update(ops, variables)
    if isinstance(update, str):
        return update
    kind, target, source, scalars = update
    for scalar in scalars.values():
        if scalar is not None and any(isinstance(n, ast.Name) and n.id in variables for n in walk_nodes(scalar)):
            return "a factor of the update reads the loop's tensors"
    data = _data_uses(loop, variables)
    if data is None:
        return "a loop variable is used both with and without `.data`"
    detached = {v for v, owner in zip(variables, owners) if v in data or (owner is not None and owner[1] == "values")}
    if set(variables) - detached and not contexts and not _grad_off(ctx, loop):
        return "the update does not run under `torch.no_grad()` (nor on `.data`)"
    # `mul_` + `add_` stays two steps even as `d` and `1 - d`: lerp wants both lists of one dtype, and an EMA
    # kept in float32 for a bfloat16 model is updated by mul_/add_ but would make lerp raise
    floor = floors.too_new(ctx.settings.torch_version,
                           [floors.FOREACH_LERP if kind == "lerp" else floors.FOREACH_MUL_ADD])
    if floor is not None:
        return floor.reason()
    if _has_comment(ctx, loop):
        return "the loop holds comments the rewrite would drop"
    if _read_elsewhere(ctx, loop, set(variables)):
        return "a loop variable is read after the loop"
    if _TORCH in ctx.text:
        return "the file already spells the fix's placeholder name"
    lists = _list_names(ctx, variables, owners)  # type: ignore[arg-type]
    built = [f"[{v}.data for {v} in {ctx.segment(a)}]" if v in data else f"list({ctx.segment(a)})"
             for v, a in zip(variables, it.args)]
    names = dict(zip(variables, lists))
    assignment = f"{', '.join(lists)} = {', '.join(built)}"
    if len(assignment) > 88:
        lines = [f"{name} = {value}" for name, value in zip(lists, built)]
    else:
        lines = [assignment]
    if kind == "lerp":
        lines.append(f"{_TORCH}._foreach_lerp_({names[target]}, {names[source]}, {_text(ctx, scalars['weight'])})")
        message = "Replace the loop with `torch._foreach_lerp_` over lists of the tensors"
    else:
        lines.append(f"{_TORCH}._foreach_mul_({names[target]}, {_text(ctx, scalars['scale'])})")
        alpha = scalars["alpha"]
        lines.append(f"{_TORCH}._foreach_add_({names[target]}, {names[source]}"
                     + (f", alpha={_text(ctx, alpha)})" if alpha is not None else ")"))
        message = "Replace the loop with `torch._foreach_mul_` and `torch._foreach_add_` over lists of the tensors"
    code = "\n".join(lines) + "\n"
    if contexts:
        code = f"with {contexts}:\n" + "".join(f"    {line}\n" for line in lines)
    try:
        ast.parse(code)
    except SyntaxError:
        return "a factor of the update cannot be moved out of the loop as written"
    return _Plan(code, message)


def _owner(iterable: ast.expr) -> Optional[tuple[str, str]]:
    """(`ema`, "parameters") for `ema.parameters()`, (`self.ema`, "values") for `self.ema.state_dict().values()`:
    the module, named by a name or attributes of one, and what of it the loop iterates."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute)
            and not iterable.args and not iterable.keywords):
        return None
    method, receiver = iterable.func.attr, iterable.func.value
    if method == "values":
        if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr == "state_dict" and not receiver.args and not receiver.keywords):
            return None
        receiver = receiver.func.value
    elif method not in ("parameters", "buffers"):
        return None
    base = receiver
    while isinstance(base, ast.Attribute):
        base = base.value
    if not isinstance(base, ast.Name):
        return None
    last = receiver.attr if isinstance(receiver, ast.Attribute) else receiver.id  # type: ignore[attr-defined]
    return last, method


def _chain(expr: ast.expr) -> Optional[list[_Op]]:
    """The in-place calls of `v.mul_(d).add_(w, alpha=a)` in the order they run, on one variable."""
    calls: list[ast.Call] = []
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in IN_PLACE:
        calls.append(expr)
        expr = expr.func.value
    variable = _variable(expr)
    if not calls or variable is None:
        return None
    return [_Op(c.func.attr, variable, c) for c in reversed(calls)]  # type: ignore[attr-defined]


def _variable(expr: ast.expr) -> Optional[str]:
    """`p` for `p` or `p.data`."""
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


Update = tuple[str, str, str, dict[str, Optional[ast.expr]]]  # kind, target, source, scalars


def _update(ops: list[_Op], variables: list[str]) -> Union[Update, str]:
    """Which of the three update spellings the calls are: `t.lerp_(s, w)`; `t.mul_(d)` then `t.add_(s[,
    alpha=a])`; `t.copy_(t * d + s * a)` (factors on either side); or why none."""
    unknown = "the loop body is not an EMA update (`lerp_`, `mul_` + `add_`, or `copy_(t * d + s * a)`)"
    if len({op.target for op in ops}) != 1:
        return unknown
    target = ops[0].target
    others = [v for v in variables if v != target]
    if len(others) != 1:
        return unknown
    source = others[0]
    methods = [op.method for op in ops]
    if methods == ["lerp_"]:
        call = ops[0].call
        given = dict(zip(("end", "weight"), call.args))
        for keyword in call.keywords:
            if keyword.arg not in ("end", "weight") or keyword.arg in given:
                return unknown
            given[keyword.arg] = keyword.value
        if len(call.args) > 2 or set(given) != {"end", "weight"} or _variable(given["end"]) != source:
            return unknown
        return "lerp", target, source, {"weight": given["weight"]}
    if methods == ["mul_", "add_"]:
        mul, add = ops[0].call, ops[1].call
        if len(mul.args) != 1 or mul.keywords or len(add.args) != 1 or _variable(add.args[0]) != source:
            return unknown
        if any(k.arg != "alpha" for k in add.keywords):
            return unknown
        alpha = add.keywords[0].value if add.keywords else None
        return "muladd", target, source, {"scale": mul.args[0], "alpha": alpha}
    if methods == ["copy_"]:
        call = ops[0].call
        value = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
            return unknown
        terms = [_term(value.left, variables), _term(value.right, variables)]
        if any(t is None for t in terms):
            return unknown
        factors = {t[0]: t[1] for t in terms if t is not None}
        if set(factors) != {target, source}:
            return unknown
        return "muladd", target, source, {"scale": factors[target], "alpha": factors[source]}
    return unknown


def _term(expr: ast.expr, variables: list[str]) -> Optional[tuple[str, ast.expr]]:
    """(`p`, `d`) for `p * d`, `d * p`, `p.data * d` where `p` is a loop variable."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult)):
        return None
    for tensor, factor in ((expr.left, expr.right), (expr.right, expr.left)):
        variable = _variable(tensor)
        if variable in variables and _variable(factor) not in variables:
            return variable, factor
    return None


def _data_uses(loop: ast.For, variables: list[str]) -> Optional[set[str]]:
    """The loop variables the body uses only as `v.data`; None when one is used both ways."""
    through: dict[str, set[bool]] = {v: set() for v in variables}
    data_nodes = set()
    for node in walk_nodes(ast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.value, ast.Name) \
                and node.value.id in through:
            through[node.value.id].add(True)
            data_nodes.add(id(node.value))
    for node in walk_nodes(ast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, ast.Name) and node.id in through and id(node) not in data_nodes:
            through[node.id].add(False)
    if any(len(ways) > 1 for ways in through.values()):
        return None
    return {v for v, ways in through.items() if ways == {True}}


def _grad_off(ctx: AstContext, loop: ast.For) -> bool:
    """The loop runs inside `with torch.no_grad()` / `inference_mode()`, or in a function decorated with one."""
    for ancestor in ctx.ancestors(loop):
        if isinstance(ancestor, ast.With):
            if any(_is_grad_off(ctx, item.context_expr) for item in ancestor.items):
                return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(_is_grad_off(ctx, d) for d in ancestor.decorator_list)
        if isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
            return False
    return False


def _is_grad_off(ctx: AstContext, expr: ast.expr) -> bool:
    return ctx.names.qualname(expr.func if isinstance(expr, ast.Call) else expr) in GRAD_OFF


def _has_comment(ctx: AstContext, loop: ast.For) -> bool:
    """A comment on the loop's lines (its header's included)."""
    rows = range(loop.lineno, (loop.end_lineno or loop.lineno) + 1)
    try:
        return any(t.type == tokenize.COMMENT and t.start[0] in rows
                   for t in tokenize.generate_tokens(io.StringIO(ctx.text).readline))
    except (tokenize.TokenError, SyntaxError):
        return True


def _read_elsewhere(ctx: AstContext, loop: ast.For, variables: set[str]) -> bool:
    """A loop variable may be read with the value the loop left in it: after the loop with no assignment of
    the name in between, or earlier in a loop around it with no assignment before the read."""
    scope: ast.AST = ctx.enclosing_function(loop) or ctx.tree
    outer: Optional[ast.AST] = None
    for ancestor in ctx.ancestors(loop):
        if ancestor is scope or isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
            outer = ancestor
            break
    inside = {id(n) for n in walk_nodes(loop)}
    end = (loop.end_lineno or loop.lineno, loop.end_col_offset or 0)
    names = [n for n in walk_nodes(scope) if isinstance(n, ast.Name) and n.id in variables and id(n) not in inside]
    stores = [n for n in names if not isinstance(n.ctx, ast.Load)]
    for load in (n for n in names if isinstance(n.ctx, ast.Load)):
        where = (load.lineno, load.col_offset)
        if where > end:
            start = end
        elif outer is not None and (outer.lineno, outer.col_offset) < where:  # type: ignore[attr-defined]
            start = (outer.lineno, outer.col_offset)  # type: ignore[attr-defined]
        else:
            continue
        if not any(s.id == load.id and start < (s.lineno, s.col_offset) < where for s in stores):
            return True
    return False


def _list_names(ctx: AstContext, variables: list[str], owners: list[tuple[str, str]]) -> list[str]:
    """Names for the lists: `ema_params`, `model_params` (`params` for `self.parameters()`), else `p_list`,
    made unique against every name of the file."""
    taken = _names_in(ctx.tree)
    bases = [(_LIST_SUFFIX[m] if owner == "self" else f"{owner}_{_LIST_SUFFIX[m]}") for owner, m in owners]
    if len(set(bases)) != len(bases):
        bases = [f"{v}_list" for v in variables]
    chosen: list[str] = []
    for base in bases:
        name = base
        while name in taken:
            name += "_"
        taken.add(name)
        chosen.append(name)
    return chosen


def _names_in(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in walk_nodes(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _text(ctx: AstContext, expr: Optional[ast.expr]) -> str:
    assert expr is not None
    return ctx.segment(expr)

