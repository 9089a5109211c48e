"""The nodes the mixed-precision rewrite of a training step edits (GPU001, GPU002), on LibCST.

Whether there is a fix and which (the dtype, a GradScaler or none, binary_cross_entropy kept
outside autocast, the torch it needs) is decided on `ast` in analysis/amp_fix.py, which `check`
reads without parsing LibCST. Here, once a fix is to be built: the statements autocast wraps, the
binary_cross_entropy calls computed in float32, the scaler's plan (its backward, step and where
`unscale_` goes) and where the run's one scaler lives. rewrites/mixed_precision.py turns them
into the one CST transformation of the fix.
"""

from __future__ import annotations

import builtins
from typing import Optional, Union

import libcst as cst

from gpulint.analysis.amp_fix import free_name
from gpulint.analysis.amp_fix import taken_names as names_taken
from gpulint.analysis.training import (
    Backward,
    OptimizerStep,
    TrainingFacts,
    TrainingStep,
)
from gpulint.core.context import FileContext
from gpulint.core.names import NameUses, dotted
from gpulint.core.values import self_attribute_value, single_value
from gpulint.core.walk import walk
from gpulint.project.clamps import BCE_FUNCTIONS, BCE_MODULES
from gpulint.records import dataclass
from gpulint.rewrites.amp_device import default_device, device_code_in, name_device_code, parameter_visible

Container = Union[cst.IndentedBlock, cst.Module]

# calls that only fetch, move or reshape a batch: a region never starts with them
_MOVING_METHODS = frozenset({
    "to", "cuda", "xpu", "mps", "cpu", "float", "double", "long", "int", "bool", "contiguous", "view", "reshape",
    "squeeze", "unsqueeze", "permute", "flatten", "pin_memory", "get", "items", "keys", "values",
})
_MOVING_FUNCTIONS = frozenset({"next", "iter", "len", "zip", "enumerate", "range", "tuple", "list", "dict"})


def _moves_data_only(statement: cst.BaseStatement) -> bool:
    """A line that only unpacks, fetches, makes or moves a batch (no model, no loss)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    calls: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            calls.append(node)

    walk(statement, _Calls())
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


def _lines_writing(node: cst.CSTNode, names: set[str]) -> list[cst.SimpleStatementLine]:
    lines: list[cst.SimpleStatementLine] = []

    class _Lines(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, line: cst.SimpleStatementLine) -> bool:
            if NameUses.of(line).writes & names:
                lines.append(line)
            return False

    walk(node, _Lines())
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
            uses = [NameUses.of(s) for s in body[:position]]
            ends = [k for k in range(position) if uses[k].writes & names]
            if ends:
                end = max(ends)
                start = _slice_start(body, uses, end)
                needed = _slice_members(uses, end)
                while start < end and (start not in needed or _not_forward(facts, body[start])
                                       or not _calls_model(facts, body[start])):
                    start += 1  # `model = SimpleMLP()`, `x = torch.randn(...)`, `futures.wait_all(...)`
                if any(_not_forward(facts, body[k]) for k in range(start, end + 1)):
                    return None  # construction or waiting between forward statements: cannot wrap only the forward
                return Region(ancestor, start, end)
        elif isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            child = ancestor
        if ancestor is step.node or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
    return None


_BUILTINS = frozenset(dir(builtins))
_WAITS = frozenset({"wait", "wait_all", "to_here", "rpc_sync", "rpc_async", "collect_all"})
# tensor methods that make or reshape data: a line calling only these (and torch functions) builds a
# batch, it does not run the model
_TENSOR_METHODS = _MOVING_METHODS | frozenset({
    "argmax", "argmin", "sum", "mean", "max", "min", "abs", "exp", "log", "pow", "sqrt", "clamp", "softmax",
    "log_softmax", "sigmoid", "tanh", "round", "floor", "ceil", "masked_fill", "gather", "scatter", "index_select",
    "transpose", "t", "expand", "repeat", "split", "chunk", "detach", "clone", "type", "half", "bfloat16",
    "numpy", "tolist", "item", "size", "normal_", "uniform_", "fill_", "zero_", "manual_seed",
})


def _calls_model(facts: TrainingFacts, statement: cst.CSTNode) -> bool:
    """The statement calls something other than torch, builtins and tensor methods: a model or a loss."""
    return any(facts.contains(statement, call) and _is_model_call(facts, call) for call in facts.calls)


def _is_model_call(facts: TrainingFacts, call: cst.Call) -> bool:
    func = call.func
    qualified = facts.ctx.qualname(func)
    if qualified is not None:
        return qualified.split(".", 1)[0] not in ("torch", "numpy", "math", "random")
    if isinstance(func, cst.Name):
        return not (func.value in _BUILTINS and facts.ctx.names.binding_scope(func) is None)  # `len(...)`
    return not (isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS)


def region_model_calls(facts: TrainingFacts, region: Region) -> list[cst.Call]:
    """The calls of the region that run a model or a loss (not torch, builtins or tensor methods), in order."""
    statements = region.container.body[region.start:region.end + 1]
    found: list[cst.Call] = []
    for call in facts.calls:
        if any(facts.contains(statement, call) for statement in statements) and _is_model_call(facts, call):
            found.append(call)
    return found


def _not_forward(facts: TrainingFacts, statement: cst.CSTNode) -> bool:
    """A line that builds a model or an optimizer, or waits on futures: never part of the forward pass."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Expr)) else None
        if not isinstance(value, cst.Call):
            return False
        while isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVING_METHODS \
                and isinstance(value.func.value, cst.Call):
            value = value.func.value  # `SimpleMLP().to(device)`: judged by what is built
        func = value.func
        last = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else "")
        qualified = facts.ctx.qualname(func) or ""
        # `self.G(x)` calls a module the instance holds, it does not build a class (analysis/amp_regions.py)
        held = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        constructs = last[:1].isupper() and not held and not qualified.startswith("torch.Tensor")
        if not (constructs or last in _WAITS):
            return False
    return True


def _slice_members(uses: list[NameUses], end: int) -> set[int]:
    """Indices of the statements the one at `end` depends on (itself included)."""
    needed = set(uses[end].reads)
    members = {end}
    for k in range(end - 1, -1, -1):
        if uses[k].writes & needed:
            needed |= uses[k].reads
            members.add(k)
    return members


def _slice_start(body: list, uses: list[NameUses], end: int) -> int:
    needed = set(uses[end].reads)
    start = end
    for k in range(end - 1, -1, -1):
        if uses[k].writes & needed:
            needed |= uses[k].reads
            if not _moves_data_only(body[k]):
                start = k
    return start


# -- ops CUDA autocast refuses ----------------------------------------------------------


def refused_calls(facts: TrainingFacts, line: cst.CSTNode) -> tuple[cst.Call, ...]:
    """The binary_cross_entropy calls of `line` (F.binary_cross_entropy, a BCELoss instance called), which
    the fix computes in float32 outside autocast (analysis/amp_fix.py decides that it can)."""
    ctx = facts.ctx
    found: list[cst.Call] = []
    for call in facts.calls:
        if not facts.contains(line, call):
            continue
        func = call.func
        if ctx.qualname(func) in BCE_FUNCTIONS:
            found.append(call)
            continue
        value: Optional[cst.BaseExpression] = None
        if isinstance(func, cst.Name):
            value = single_value(func, ctx.names)
        elif isinstance(func, cst.Attribute):
            value = self_attribute_value(func, ctx.names)
        if isinstance(value, cst.Call) and ctx.qualname(value.func) in BCE_MODULES:
            found.append(call)
    return tuple(found)


def as_float(expr: cst.BaseExpression) -> cst.Call:
    """`expr.float()`, parenthesised when `expr` binds looser than an attribute."""
    parenthesised = bool(getattr(expr, "lpar", None))
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or parenthesised:
        expr = expr.with_changes(lpar=(cst.LeftParen(),), rpar=(cst.RightParen(),)) if not parenthesised else expr
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("float")))


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
    walk(step.node, uses)
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


def taken_names(ctx: FileContext) -> set[str]:
    """Every name the file binds, in any scope, read as the prediction reads it on `ast`."""
    return names_taken(ctx.names)


def scaler_name(ctx: FileContext) -> str:
    return free_name(taken_names(ctx), ("scaler", "grad_scaler", "amp_scaler"))


@dataclass(frozen=True)
class ScalerHome:
    """Where the run's one GradScaler is created: next to the optimizer, so it lives as long.

    A scaler created inside a per-epoch `train()` recalibrates its scale every epoch and is
    never saved. When the optimizer is a module global, the scaler is created beside it; when
    `train()` receives the optimizer from a function of this file, that function creates the
    scaler and passes it in (`train()` keeps a `scaler=None` fallback for other callers).
    """

    creation: cst.BaseStatement  # the scaler is created right after this statement
    device: str  # device-type code valid there
    function: Optional[cst.FunctionDef] = None  # the step's function, which gains `scaler=None`
    calls: tuple[cst.Call, ...] = ()  # its calls that pass the scaler in
    saves: tuple[cst.Dict, ...] = ()  # checkpoint dicts holding the optimizer's state
    loads: tuple[tuple[cst.SimpleStatementLine, str], ...] = ()  # optimizer state loads, with the dict's code


def _function_of(facts: TrainingFacts, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    scope = facts.scope_of(node)
    return scope if isinstance(scope, cst.FunctionDef) else None


def scaler_home(facts: TrainingFacts, step: TrainingStep, plan: ScalerPlan, torch: str,
                name: str) -> Optional[ScalerHome]:
    """Where the scaler should live, or None to create it before the step's loop (same lifetime there)."""
    optimizer = plan.step.optimizer
    function = _function_of(facts, step.node)
    if not isinstance(optimizer, cst.Name) or function is None or isinstance(step.node, cst.FunctionDef):
        return None
    names = facts.ctx.names
    owner = names.binding_scope(optimizer)
    if owner is None:
        return None
    if owner is names.module_scope:  # a global optimizer: the scaler becomes a global beside it
        value = single_value(optimizer, names)
        creation = facts.statement_of(value) if value is not None else None
        if not isinstance(creation, cst.SimpleStatementLine) or _function_of(facts, creation) is not None:
            return None
        device = device_code_in(facts, (function, facts.ctx.module), creation, torch) or _literal_device(facts)
        saves, loads = _checkpoints(facts, optimizer, owner, creation, None)
        return ScalerHome(creation, device, saves=saves, loads=loads)
    if owner is not names.scopes.get(id(function)) or not parameter_visible(facts, optimizer, step.node):
        return None
    return _caller_home(facts, function, optimizer.value, torch, name)


def _caller_home(facts: TrainingFacts, function: cst.FunctionDef, parameter: str, torch: str,
                 name: str) -> Optional[ScalerHome]:
    names = facts.ctx.names
    params = [*function.params.posonly_params, *function.params.params]
    if any(p.name.value == name for p in (*params, *function.params.kwonly_params)):
        return None
    if names.module_scope.bindings.get(function.name.value) != [None] or _function_of(facts, function) is not None:
        return None  # not a plain module-level function
    position = next((i for i, p in enumerate(params) if p.name.value == parameter), None)
    calls = [c for c in facts.calls if isinstance(c.func, cst.Name) and c.func.value == function.name.value
             and names.binding_scope(c.func) is names.module_scope]
    if not calls:
        return None
    home_scope = facts.scope_of(calls[0])
    creation: Optional[cst.BaseStatement] = None
    passed: Optional[cst.Name] = None
    for call in calls:
        if facts.scope_of(call) is not home_scope or home_scope is function:
            return None
        argument = _argument(call, parameter, position)
        if not isinstance(argument, cst.Name) or names.binding_scope(argument) is not names.scopes.get(id(home_scope)):
            return None
        value = single_value(argument, names)
        statement = facts.statement_of(value) if value is not None else None
        if statement is None or (creation is not None and statement is not creation):
            return None
        if not facts.before(statement, call):
            return None
        creation, passed = statement, argument
    assert creation is not None and passed is not None
    if not isinstance(creation, cst.SimpleStatementLine):
        return None
    device = device_code_in(facts, (home_scope,), creation, torch) or _device_through_call(
        facts, function, calls[0], creation, torch) or _literal_device(facts)
    saves, loads = _checkpoints(facts, passed, names.binding_scope(passed), creation, home_scope)
    return ScalerHome(creation, device, function, tuple(calls), saves, loads)


def _argument(call: cst.Call, parameter: str, position: Optional[int]) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == parameter:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if position is None or any(a.star for a in positional[:position + 1]) or len(positional) <= position:
        return None
    return positional[position].value


def _device_through_call(facts: TrainingFacts, function: cst.FunctionDef, call: cst.Call,
                         creation: cst.CSTNode, torch: str) -> Optional[str]:
    """The device the caller passes to the step function's device parameter, as code at `creation`."""
    inside = device_code_in(facts, (function,), function.body, torch)
    params = [*function.params.posonly_params, *function.params.params]
    for index, param in enumerate(params):
        if inside not in (f"{param.name.value}.type", f"{torch}.device({param.name.value}).type", param.name.value):
            continue
        argument = _argument(call, param.name.value, index)
        if isinstance(argument, cst.Name):
            written = name_device_code(facts, argument, creation, torch)
            if written is not None:
                return written
    return None


def _literal_device(facts: TrainingFacts) -> str:
    return facts.ctx.style.string(default_device(facts.ctx))


def _checkpoints(facts: TrainingFacts, optimizer: cst.Name, owner: object, creation: cst.CSTNode,
                 scope: Optional[cst.CSTNode],
                 ) -> tuple[tuple[cst.Dict, ...], tuple[tuple[cst.SimpleStatementLine, str], ...]]:
    """Checkpoint dicts holding this optimizer's state, and statements loading it back (after `creation`)."""
    names = facts.ctx.names
    saves: list[cst.Dict] = []
    loads: list[tuple[cst.SimpleStatementLine, str]] = []

    def same(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == optimizer.value and names.binding_scope(expr) is owner

    for call in facts.calls:
        if scope is not None and not facts.contains(scope, call):
            continue
        func = call.func
        if not (isinstance(func, cst.Attribute) and same(func.value)):
            continue
        if func.attr.value == "state_dict" and not call.args:
            element = facts.parent(call)
            holder = facts.parent(element) if isinstance(element, cst.DictElement) else None
            if isinstance(holder, cst.Dict) and facts.before(creation, holder) and all(
                    isinstance(e, cst.DictElement) for e in holder.elements):
                saves.append(holder)
        elif func.attr.value == "load_state_dict" and len(call.args) == 1:
            source = call.args[0].value
            line = facts.statement_of(call)
            if isinstance(source, cst.Subscript) and isinstance(source.value, cst.Name) and isinstance(
                    facts.parent(call), cst.Expr) and isinstance(line, cst.SimpleStatementLine) \
                    and len(line.body) == 1 and facts.before(creation, line):
                loads.append((line, source.value.value))
    return tuple(dict.fromkeys(saves)), tuple(loads)
