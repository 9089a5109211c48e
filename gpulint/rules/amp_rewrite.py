"""The mixed-precision rewrite of a training step (GPU001, GPU002).

Wrap the forward pass and loss in autocast (backward stays outside), and for float16 route
backward and the optimizer step through one GradScaler created before the loop. The whole
rewrite is one CST transformation of the statement that receives the scaler, so every edit of
the fix lands in one replacement that the engine reduces to the changed text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import libcst as cst

from gpulint.analysis.names import dotted
from gpulint.analysis.training import Backward, OptimizerStep, TrainingFacts, TrainingStep, positional
from gpulint.analysis.values import single_value
from gpulint.engine.context import FileContext
from gpulint.engine.pending import Replace
from gpulint.engine.rewrite import is_literal

Container = Union[cst.IndentedBlock, cst.Module]

# calls that only fetch, move or reshape a batch: a region never starts with them
_MOVING_METHODS = frozenset({
    "to", "cuda", "cpu", "float", "double", "long", "int", "bool", "contiguous", "view", "reshape",
    "squeeze", "unsqueeze", "permute", "flatten", "pin_memory", "get", "items", "keys", "values",
})
_MOVING_FUNCTIONS = frozenset({"next", "iter", "len", "zip", "enumerate", "range", "tuple", "list", "dict"})
_DEVICE_TYPES = ("cuda", "cpu")
_SGD = frozenset({"torch.optim.SGD", "torch.optim.sgd.SGD"})


# -- names a statement reads and binds ------------------------------------------------
class _NameUse(cst.CSTVisitor):
    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    def _bind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.writes.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)
        else:
            target.visit(self)  # `x[i] = ...`, `obj.attr = ...` read their base

    def visit_Name(self, node: cst.Name) -> None:
        self.reads.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._bind(node.target)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._bind(node.target)
        if node.value is not None:
            node.value.visit(self)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._bind(node.target)
        if isinstance(node.target, cst.Name):
            self.reads.add(node.target.value)
        node.value.visit(self)
        return False

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._bind(node.name)  # type: ignore[arg-type]
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self._bind(node.target)
        node.value.visit(self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.writes.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.writes.add(node.name.value)
        return False


def _name_use(node: cst.CSTNode) -> _NameUse:
    use = _NameUse()
    node.visit(use)
    return use


def _moves_data_only(statement: cst.BaseStatement) -> bool:
    """A line that only unpacks, fetches, makes or moves a batch (no model, no loss)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    calls: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            calls.append(node)

    statement.visit(_Calls())
    for call in calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MOVING_METHODS:
            continue
        if isinstance(func, cst.Name) and func.value in _MOVING_FUNCTIONS:
            continue
        if any(_names_device(arg.value) for arg in call.args):
            continue  # `get_batch(split, device)`, `torch.randn(n, device=device)`: makes a batch on the device
        return False
    return True


def _names_device(expr: cst.BaseExpression) -> bool:
    name = dotted(expr)
    return name is not None and "device" in name.split(".")[-1].lower()


def _loss_names(expr: cst.BaseExpression) -> Optional[set[str]]:
    """Names a loss expression combines (`loss`, `loss / accum`, `loss.mean()`), None if it computes more."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, (cst.Integer, cst.Float, cst.Attribute)):
        return set()
    if isinstance(expr, cst.BinaryOperation):
        left, right = _loss_names(expr.left), _loss_names(expr.right)
        return None if left is None or right is None else left | right
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not expr.args:
        return _loss_names(expr.func.value)
    return None


# -- the region to wrap in autocast ---------------------------------------------------
@dataclass(frozen=True)
class Region:
    """Statements `start..end` (inclusive) of `container` go under autocast."""

    container: Container
    start: int
    end: int


def _index(body: tuple[cst.CSTNode, ...] | list, node: cst.CSTNode) -> int:
    for i, item in enumerate(body):
        if item is node:
            return i
    return -1


def loss_statement(facts: TrainingFacts, step: TrainingStep, backward: Backward) -> Optional[cst.CSTNode]:
    """The statement that assigns the loss, else the one that calls backward."""
    region = autocast_region(facts, step, backward)
    if region is not None and isinstance(region.container.body[region.end], cst.SimpleStatementLine):
        return region.container.body[region.end]
    names = _loss_names(backward.loss) or set()
    statement = facts.statement_of(backward.call)
    if statement is None or not names:
        return statement
    # the loss may be assigned inside a compound statement (`with ctx: loss = ...`): find that line
    last: Optional[cst.CSTNode] = None
    scope = facts.scope_of(backward.call)
    for line in _lines_writing(step.node, names):
        if facts.before(line, backward.call) and facts.scope_of(line) is scope:
            last = line
    return last if last is not None else statement


def loss_passed_in(facts: TrainingFacts, backward: Backward) -> bool:
    """The loss is a parameter of the function calling backward, never assigned there."""
    names = _loss_names(backward.loss)
    if not names:
        return False
    function = next((a for a in facts.ancestors(backward.call) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
    if not isinstance(function, cst.FunctionDef):
        return False
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                     *function.params.kwonly_params)}
    if not names <= params:
        return False
    return not _lines_writing(function, names)


def _lines_writing(node: cst.CSTNode, names: set[str]) -> list[cst.SimpleStatementLine]:
    lines: list[cst.SimpleStatementLine] = []

    class _Lines(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, line: cst.SimpleStatementLine) -> bool:
            if _name_use(line).writes & names:
                lines.append(line)
            return False

    node.visit(_Lines())
    return lines


def autocast_region(facts: TrainingFacts, step: TrainingStep, backward: Backward) -> Optional[Region]:
    """From the first statement the loss depends on through the loss assignment, in one block."""
    names = _loss_names(backward.loss)
    if not names:
        return None
    child: Optional[cst.CSTNode] = facts.statement_of(backward.call)
    if child is None:
        return None
    for ancestor in facts.ancestors(child):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            body = list(ancestor.body)
            position = _index(body, child)
            uses = [_name_use(s) for s in body[:position]]
            ends = [k for k in range(position) if uses[k].writes & names]
            if ends:
                end = max(ends)
                return Region(ancestor, _slice_start(body, uses, end), end)
        elif isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            child = ancestor
        if ancestor is step.node or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
    return None


def _slice_start(body: list, uses: list[_NameUse], end: int) -> int:
    needed = set(uses[end].reads)
    start = end
    for k in range(end - 1, -1, -1):
        if uses[k].writes & needed:
            needed |= uses[k].reads
            if not _moves_data_only(body[k]):
                start = k
    return start


# -- the GradScaler part ----------------------------------------------------------------
@dataclass(frozen=True)
class ScalerPlan:
    backward: Backward
    step: OptimizerStep
    unscale_before: Optional[cst.BaseStatement]  # first gradient clipping / `.grad` use before step


class _GradUses(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad":
            self.nodes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        name = node.func.attr.value if isinstance(node.func, cst.Attribute) else (
            node.func.value if isinstance(node.func, cst.Name) else "")
        if name.startswith("clip_grad") or name == "unscale_":
            self.nodes.append(node)


def scaler_plan(facts: TrainingFacts, step: TrainingStep, backward: Backward) -> Optional[ScalerPlan]:
    """How to add a GradScaler to this step, or None when the step is too irregular to rewrite."""
    if len(step.backwards) != 1 or len(step.steps) != 1 or backward.scaled:
        return None
    opt_step = step.steps[0]
    call = opt_step.call
    if opt_step.via_scaler or call.args or not facts.before(backward.call, call):
        return None
    if _fused_sgd_with_momentum(facts, opt_step.optimizer):
        return None
    if not isinstance(facts.parent(call), cst.Expr):
        return None
    if backward.autograd and (len(backward.call.args) != 1 or backward.call.args[0].keyword is not None
                              and backward.call.args[0].keyword.value != "tensors"):
        return None
    step_statement = facts.statement_of(call)
    container = facts.parent(step_statement) if step_statement is not None else None
    if not isinstance(container, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
        return None
    uses = _GradUses()
    step.node.visit(uses)
    first: Optional[cst.BaseStatement] = None
    for node in uses.nodes:
        if not (facts.before(backward.call, node) and facts.before(node, call)):
            continue
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "unscale_":
            return None
        holder = _statement_in(facts, node, container)
        if holder is None or facts.contains(holder, backward.call):
            return None  # `.grad` used on every micro-step but stepped on a boundary: unscale_ can't go there
        if first is None or facts.before(holder, first):
            first = holder
    return ScalerPlan(backward, opt_step, first)


def _fused_sgd_with_momentum(facts: TrainingFacts, optimizer: cst.BaseExpression) -> bool:
    """Fused SGD with momentum leaves its momentum buffer uninitialised when the first scaled step
    overflows (weights blew up within 3 steps on torch 2.14): never pair it with a GradScaler."""
    value = single_value(optimizer, facts.ctx.names) if isinstance(optimizer, cst.Name) else None
    if not isinstance(value, cst.Call) or facts.ctx.qualname(value.func) not in _SGD:
        return False
    kwargs = facts.ctx.kwargs(value)
    if not kwargs.complete:
        return True
    fused, momentum = kwargs.get("fused"), kwargs.get("momentum")
    return kwargs.has("fused") and not is_literal(fused, "False", "None") and kwargs.has("momentum") \
        and not is_literal(momentum, "0")


def _statement_in(facts: TrainingFacts, node: cst.CSTNode, container: cst.CSTNode) -> Optional[cst.BaseStatement]:
    child: cst.CSTNode = node
    for ancestor in facts.ancestors(node):
        if ancestor is container:
            return child if isinstance(child, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else None
        child = ancestor
    return None


def scaler_anchor(facts: TrainingFacts, node: cst.CSTNode) -> cst.BaseStatement:
    """The statement the scaler is created before: the outermost loop of the function holding the step,
    or for a step function without a loop, that function (or its class) in the enclosing code."""
    if isinstance(node, cst.FunctionDef):
        anchor: cst.CSTNode = node
        for ancestor in facts.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                anchor = ancestor
            elif not isinstance(ancestor, cst.IndentedBlock):
                break
        return anchor  # type: ignore[return-value]
    anchor = node
    for ancestor in facts.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            anchor = ancestor
    return anchor  # type: ignore[return-value]


# -- device type ----------------------------------------------------------------------
def _device_kind(value: Optional[cst.BaseExpression], ctx: FileContext) -> Optional[str]:
    """"device" for a torch.device, "string" for a "cuda"/"cpu" string, else None."""
    if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.device":
        return "device"
    if isinstance(value, cst.SimpleString) and value.evaluated_value in _DEVICE_TYPES:
        return "string"
    if isinstance(value, cst.IfExp):
        kinds = {_device_kind(value.body, ctx), _device_kind(value.orelse, ctx)}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def visible_at(facts: TrainingFacts, name: cst.Name, anchor: cst.CSTNode) -> bool:
    """The name's one binding is made before `anchor`, in code that `anchor` can see."""
    owner = facts.ctx.names.binding_scope(name)
    if owner is None:
        return False
    value = single_value(name, facts.ctx.names)
    if value is None or not facts.before(value, anchor):
        return False
    return owner.node is facts.ctx.module or facts.contains(owner.node, anchor)


def device_type_code(facts: TrainingFacts, step: TrainingStep, anchor: cst.CSTNode) -> str:
    """`device.type`, `device` or `"cuda"`: the script's own device where it can be seen."""
    candidates: list[cst.Name] = []
    for node in (step.node, facts.scope_of(step.node)):
        for call in facts.calls:
            if not facts.contains(node, call) or not isinstance(call.func, cst.Attribute) \
                    or call.func.attr.value != "to":
                continue
            args = positional(call)
            target = args[0] if args else next(
                (a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
            if isinstance(target, cst.Name):
                candidates.append(target)
        if candidates:
            break
    found: dict[str, str] = {}
    for name in candidates:
        kind = _device_kind(single_value(name, facts.ctx.names), facts.ctx)
        if kind is not None and visible_at(facts, name, anchor):
            found[name.value] = f"{name.value}.type" if kind == "device" else name.value
    if len(found) == 1:
        return next(iter(found.values()))
    return '"cuda"'


def scaler_name(ctx: FileContext) -> str:
    taken: set[str] = set()
    for scope in ctx.names.scopes.values():
        taken.update(scope.bindings)
    for candidate in ("scaler", "grad_scaler", "amp_scaler"):
        if candidate not in taken:
            return candidate
    index = 1
    while f"scaler_{index}" in taken:
        index += 1
    return f"scaler_{index}"


# -- the transformation ---------------------------------------------------------------
@dataclass
class _Plan:
    calls: dict[int, Callable[[cst.Call], cst.BaseExpression]] = field(default_factory=dict)
    before: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    after: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    small_after: dict[int, list[cst.BaseSmallStatement]] = field(default_factory=dict)
    wrap: Optional[Region] = None
    with_item: Optional[cst.BaseExpression] = None


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        rewrite = self.plan.calls.get(id(original_node))
        return rewrite(updated_node) if rewrite is not None else updated_node

    def _statements(self, original: cst.CSTNode, original_body: tuple, updated_body: tuple) -> list:
        plan = self.plan
        wrap = plan.wrap if plan.wrap is not None and plan.wrap.container is original else None
        out: list = []
        index = 0
        while index < len(updated_body):
            o, u = original_body[index], updated_body[index]
            if wrap is not None and index == wrap.start:
                group = list(updated_body[wrap.start:wrap.end + 1])
                out.append(_with_statement(plan.with_item, group))  # type: ignore[arg-type]
                index = wrap.end + 1
                continue
            out.extend(plan.before.get(id(o), ()))
            out.append(u)
            out.extend(plan.after.get(id(o), ()))
            index += 1
        return out

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._statements(original_node, original_node.body, updated_node.body))

    def _small(self, original_body: tuple, updated_body: tuple) -> list:
        out: list = []
        for o, u in zip(original_body, updated_body):
            out.append(u)
            out.extend(self.plan.small_after.get(id(o), ()))
        return out

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        return updated_node.with_changes(body=self._small(original_node.body, updated_node.body))

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        return updated_node.with_changes(body=self._small(original_node.body, updated_node.body))


def _with_statement(item: cst.BaseExpression, group: list[cst.BaseStatement]) -> cst.With:
    first = group[0]
    leading = first.leading_lines
    group[0] = first.with_changes(leading_lines=())
    return cst.With(items=[cst.WithItem(item=item)], body=cst.IndentedBlock(body=group), leading_lines=leading)


def _strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Tuple, cst.NamedExpr, cst.Yield, cst.GeneratorExp)):
        return expr
    return expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", ()) else expr


@dataclass(frozen=True)
class StepRewrite:
    """Everything the fix writes, decided by the rule."""

    anchor: cst.BaseStatement
    torch: str  # the file's spelling of `torch`
    device: str  # code for the device type
    region: Optional[Region] = None  # wrap in autocast
    dtype: Optional[str] = None  # "float16" / "bfloat16" for the autocast written
    scaler: Optional[ScalerPlan] = None
    scaler_name: str = "scaler"
    scaler_enabled: Optional[str] = None  # `enabled=` for a scaler needed only on a float16 path


def step_edit(facts: TrainingFacts, rewrite: StepRewrite) -> Replace:
    """One replacement of the anchor statement carrying the whole rewrite."""
    plan = _Plan()
    torch, name = rewrite.torch, rewrite.scaler_name
    if rewrite.region is not None:
        plan.wrap = rewrite.region
        plan.with_item = cst.parse_expression(
            f"{torch}.autocast(device_type={rewrite.device}, dtype={torch}.{rewrite.dtype})")
    scaler = rewrite.scaler
    new_statements: list[cst.BaseStatement] = []
    if scaler is not None:
        backward = scaler.backward
        scale = cst.parse_expression(f"{name}.scale(_)")
        assert isinstance(scale, cst.Call)

        def scaled(loss: cst.BaseExpression) -> cst.Call:
            return scale.with_changes(args=[cst.Arg(value=_strip_parens(loss))])

        if backward.autograd:
            plan.calls[id(backward.call)] = lambda updated: cst.Call(
                func=cst.Attribute(value=scaled(updated.args[0].value), attr=cst.Name("backward")))
        else:
            plan.calls[id(backward.call)] = lambda updated: updated.with_changes(
                func=updated.func.with_changes(value=scaled(updated.func.value)))  # type: ignore[attr-defined]
        optimizer_code = facts.ctx.code(scaler.step.optimizer)
        plan.calls[id(scaler.step.call)] = lambda updated: cst.parse_expression(
            f"{name}.step({optimizer_code})")
        expr = facts.parent(scaler.step.call)
        line = facts.statement_of(scaler.step.call)
        update = cst.parse_statement(f"{name}.update()\n")
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and not isinstance(
                facts.parent(line), cst.Module):
            plan.after[id(line)] = [update]
        else:
            plan.small_after[id(expr)] = [cst.Expr(cst.parse_expression(f"{name}.update()"))]
        if scaler.unscale_before is not None:
            plan.before[id(scaler.unscale_before)] = [cst.parse_statement(f"{name}.unscale_({optimizer_code})\n")]
        enabled = f", enabled=({rewrite.scaler_enabled})" if rewrite.scaler_enabled else ""
        new_statements.append(cst.parse_statement(f"{name} = {torch}.amp.GradScaler({rewrite.device}{enabled})\n"))
    anchor = rewrite.anchor
    transformed = anchor.visit(_Rewriter(plan))
    if not new_statements:
        return Replace(anchor, transformed)
    assert isinstance(transformed, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    leading = transformed.leading_lines
    new_statements[0] = new_statements[0].with_changes(leading_lines=leading)
    blank = [line for line in leading if line.comment is None][:2]
    if not isinstance(anchor, (cst.FunctionDef, cst.ClassDef)):
        blank = []
    transformed = transformed.with_changes(leading_lines=blank)
    return Replace(anchor, [*new_statements, transformed])

