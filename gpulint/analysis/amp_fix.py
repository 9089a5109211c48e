"""What GPU001/GPU002's mixed-precision fix will do, decided on CPython's `ast` (issue 25).

`check` shows whether a finding has a fix (`[*]`, unsafe, none) and, when it has none, why. For GPU001 and
GPU002 that answer is the rewrite's own decisions: which dtype it writes (a constant float16 cannot hold, a
fused optimizer under FSDP, tensor-parallel gradients force bfloat16), whether a GradScaler can drive the
step (one backward, one optimizer, no gradient use a scaler cannot unscale, no fused SGD with momentum),
whether binary_cross_entropy can stay outside autocast, which torch the symbols need. They are made here,
once, on the tree every rule already reads, so a `check` without edits never parses LibCST for them; the
rule hands them to its `build_fix` in the finding's data, and rewrites/mixed_precision.py only builds the
edits (on LibCST, which it edits).

One fact stays on LibCST: the device type the fix spells. It decides the dtype only in a file that uses
Intel GPUs and never names CUDA (the literal `"xpu"`), so the caller answers it there (`device_is_xpu`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import field
from typing import Any, Callable, Mapping, Optional, Protocol

from gpulint.analysis.amp_dtypes import autocast_arguments
from gpulint.analysis.amp_regions import AmpRegions, AstRegion
from gpulint.analysis.amp_steps import AmpBackward, AmpStep, StepNode
from gpulint.analysis.ast_context import LOCAL, AstContext, AstNames, AstScope, dotted
from gpulint.analysis.ast_values import is_literal, self_attribute_value, single_value
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import AUTOGRAD_BACKWARD, CUDNN_RNNS, REACHABLE_FROM_TORCH
from gpulint.project.ast_nodes import CODE_SCOPES, all_nodes
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.clamps import BCE_FUNCTIONS, BCE_MODULES, FLOAT16_MAX, reads_as_numpy
from gpulint.records import dataclass

FLOAT16_TINY = 6e-8  # below float16's smallest subnormal (5.96e-8): the constant becomes 0
SHARDED_SCALER_MODULE = "torch.distributed.fsdp.sharded_grad_scaler"
_BCE_TEXT = re.compile(r"\bbinary_cross_entropy\s*\(|\bBCELoss\s*\(")
_SGD = frozenset({"torch.optim.SGD", "torch.optim.sgd.SGD"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + \
            ((ast.Match,) if hasattr(ast, "Match") else ())

NO_REGION = "no fix: the forward pass and the loss cannot be told apart from the rest of the step"
_REFUSED = "no fix: binary_cross_entropy, which CUDA autocast refuses (\"unsafe to autocast\"),"
TENSOR_PARALLEL = "tensor-parallel (DTensor) gradients: a GradScaler would not agree on inf/NaN across ranks"
INTEL = "Intel GPUs compute in bfloat16"
# torch's parallel_apply re-enters autocast in each replica's thread with the enabled flag only (checked in 2.13)
DATA_PARALLEL_FLOAT16 = "nn.DataParallel runs its replicas in autocast's default float16, whatever dtype is asked"
# ATen's AutocastRNN.cpp: the CUDA autocast wrapper of `_cudnn_rnn` casts the input, hidden state and flat weights to
# float16 (kHalf) for any autocast dtype; pytorch/pytorch#42385 and blind19's LSTM notebook
CUDNN_RNN_FLOAT16 = "CUDA autocast runs cuDNN RNNs (nn.LSTM, nn.GRU, nn.RNN) in float16 whatever dtype is asked"
FSDP_FUSED = ("a fused optimizer under FSDP's ShardedGradScaler skips the cross-rank inf check "
              "(bench/fsdp_fused_scaler.py)")


@dataclass(frozen=True)
class FixForecast:
    """The fix a finding will get: its message, or why there is none (`note`), and the decisions its
    `build_fix` follows (plain values, carried in the finding's data)."""

    message: str = ""
    note: str = ""
    decisions: dict[str, Any] = field(default_factory=dict)

    @property
    def applicability(self) -> Optional[Applicability]:
        return None if self.note else Applicability.UNSAFE


def refused(note: str) -> FixForecast:
    return FixForecast(note=note)


@dataclass(frozen=True)
class Hazard:
    """A constant float16 cannot hold, in the code the autocast region runs."""

    code: str  # the literal as written: `1e-15`
    why: str  # "flushes to zero" / "overflows"

    def text(self) -> str:
        return f"{self.code} {self.why} in float16"


def default_device(text: str) -> str:
    """The device type a file uses when none is visible: "xpu" for Intel GPUs only, else "cuda"."""
    xpu = ".xpu(" in text or "torch.xpu" in text or "'xpu" in text or '"xpu' in text
    return "xpu" if xpu and "cuda" not in text else "cuda"


# -- GPU001: autocast around the forward pass and loss -------------------------------------------------
def autocast_fix(ctx: AstContext, facts: AmpRegions, step: AmpStep, backward: AmpBackward, mode: str,
                 device_is_xpu: Callable[[bool], bool]) -> FixForecast:
    """GPU001's fix under `amp-dtype = mode`. `device_is_xpu(bce)` answers, on LibCST, whether the fix would
    spell the device type as the literal "xpu" (asked only in a file that never names CUDA)."""
    region = facts.region(step, backward)
    if region is None:
        return refused(NO_REGION)
    why, bce = _outside_autocast(ctx, region)
    if why:
        return refused(why)
    project = ctx.project
    parallel = project.parallelism
    forced = ""  # why this step gets bfloat16 whatever amp-dtype says
    if backward.scaled and mode != "bfloat16":
        mode = "float16"  # the step already scales its loss: the float16 path it was written for
    elif "tensor-parallel" in parallel:
        forced = TENSOR_PARALLEL
    elif default_device(ctx.text) == "xpu" and device_is_xpu(bce):
        forced = INTEL
    elif "fsdp" in parallel and mode != "bfloat16" and fused_optimizer(ctx, step):
        forced = FSDP_FUSED
    if not forced and mode != "bfloat16":
        hazard = float16_hazard(ctx, region.statements)
        if hazard is not None and mode == "float16":
            return refused(f"no float16 fix: {hazard.text()}; amp-dtype = \"bfloat16\" gets a fix")
        if hazard is not None:
            forced = hazard.text()
    if forced:
        mode = "bfloat16"
    # why float16: nn.DataParallel's replicas, or a cuDNN RNN of the file, would not run the bfloat16 chosen
    replicas = DATA_PARALLEL_FLOAT16 if "data-parallel" in parallel else \
        CUDNN_RNN_FLOAT16 if mode != "float16" and _builds_cudnn_rnn(ctx) else ""
    if replicas and mode != "float16":
        if mode == "bfloat16":
            return refused(f"no fix: {replicas}" + (f"; bfloat16 because {forced}" if forced else
                                                     "; amp-dtype = \"float16\" gets a fix"))
        mode = "float16"
    else:
        replicas = ""
    reader = numpy_hazard(ctx, region) if mode != "float16" else ""
    if reader and (forced or mode == "bfloat16"):
        return refused(f"no fix: {reader}, and numpy has no bfloat16" + (f"; bfloat16 because {forced}" if forced
                                                                          else "; amp-dtype = \"float16\" gets a fix"))
    if reader:
        mode = "float16"  # float16 converts to numpy; "auto" would pick bfloat16 on Ampere and newer
    plan = mode != "bfloat16" and not backward.scaled
    if plan and not scaler_plan(ctx, facts, step, backward):
        return refused(f"{_no_fix(mode)}: {scaler_refusal(ctx, step)}")
    symbols = [floors.AUTOCAST]
    if plan:
        symbols.append(floors.SHARDED_GRAD_SCALER if "fsdp" in parallel else floors.GRAD_SCALER)
    if plan and mode == "auto":
        symbols.append(floors.BF16_CHECK)
    floor, ceiling = ctx.settings.torch_version, project.torch_ceiling
    no_autocast = floors.unavailable(floor, ceiling, [floors.AUTOCAST])
    if no_autocast is not None:  # torch 1.6 to 1.9: the mixed precision there is spelt another way
        return refused(f"{_no_fix(mode)}: {no_autocast.reason()}; on that torch, wrap them in "
                       "torch.cuda.amp.autocast() and scale the loss with torch.cuda.amp.GradScaler() (torch 1.6)")
    too_new = floors.unavailable(floor, ceiling, symbols)
    if too_new is not None:
        hint = "; amp-dtype = \"bfloat16\" needs only torch 1.10" if mode != "bfloat16" else ""
        return refused(f"{_no_fix(mode)}: {too_new.reason()}{hint}")
    scaler = scaler_class_name(ctx) if plan else ""
    message = _autocast_message(mode, plan, scaler, forced, bce)
    if reader:
        message += f"; float16 because {reader}, and numpy has no bfloat16"
    if replicas:
        message += f"; float16 because {replicas}"
    if plan and _scaler_recreated(ctx, facts, step):
        function = facts.scope_of(step.node)
        assert isinstance(function, _FUNCTIONS)
        message += (f"; {function.name}() runs more than once and creates a new GradScaler each time: create it "
                    "once where the optimizer is made, pass it in, and save scaler.state_dict() with the optimizer's")
    return FixForecast(message, decisions={"mode": mode, "bce": bce})


def _builds_cudnn_rnn(ctx: AstContext) -> bool:
    """The file builds an `nn.LSTM`, `nn.GRU` or `nn.RNN` (a model of the file runs one on CUDA through cuDNN)."""
    if not any(name in ctx.text for name in ("LSTM", "GRU", "RNN")):
        return False
    return any(ctx.qualname(call.func) in CUDNN_RNNS for call in ctx.nodes(ast.Call)
               if isinstance(call, ast.Call))


def _no_fix(mode: str) -> str:
    """`no fix`, or `no float16 fix` when amp-dtype names the dtype that has none."""
    return "no fix" if mode == "auto" else f"no {mode} fix"


def _autocast_message(mode: str, plan: bool, scaler: str, forced: str, bce: bool) -> str:
    if mode == "auto":
        message = (f"Wrap the forward pass and loss in torch.autocast: bfloat16 on GPUs that compute in it "
                   f"natively, else float16 with a {scaler}")
    elif mode == "float16" and plan:
        message = f"Wrap the forward pass and loss in torch.autocast (float16) and scale the loss with a {scaler}"
    else:
        message = f"Wrap the forward pass and loss in torch.autocast ({mode})"
    if forced:
        message += f"; bfloat16 because {forced}"
    if bce:
        message += "; binary_cross_entropy stays outside autocast, in float32"
    return message


# -- ops CUDA autocast refuses ----------------------------------------------------------------------------
def _outside_autocast(ctx: AstContext, region: AstRegion) -> tuple[str, bool]:
    """Why binary_cross_entropy (which CUDA autocast refuses) cannot be kept out of the region, or "" and
    whether the fix keeps it out (it is computed on the region's last line, which then leaves the region)."""
    for index in range(region.start, region.end + 1):
        direct, indirect = _refused_ops(ctx, region.lines[index])
        if indirect:
            return (f"no fix: {indirect[0]}() computes binary_cross_entropy, which CUDA autocast refuses "
                    "(\"unsafe to autocast\"), inside the forward pass"), False
        if direct and index != region.end:
            return f"{_REFUSED} is mixed into the forward pass", False
        if direct:
            if index == region.start:
                return f"{_REFUSED} is computed in the same statement as the forward pass", False
            return "", True
    return _handed_bce(ctx, region), False


def _handed_bce(ctx: AstContext, region: AstRegion) -> str:
    """Why the loss the step is handed may be one of the project's binary_cross_entropy losses
    (ProjectView.bce_losses_around, the file's own FileFacts.bce_losses), or "": the region's last line calls a
    parameter of the step's function, or an attribute of `self` the class never assigns a known value."""
    project = ctx.project
    around = [*(f"this file::{name}" for name in project.own.bce_losses), *project.bce_losses_around]
    if not around:
        return ""
    for call in (c for statement in region.lines[region.end] for c in _in_order(ctx, statement, ast.Call)):
        assert isinstance(call, ast.Call)
        func = call.func
        if isinstance(func, ast.Name):
            function = ctx.enclosing_function(call)
            handed = function is not None and func.id in _parameters(function) \
                and single_value(func, ctx.names) is None
        else:
            handed = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and self_attribute_value(ctx, func) is None
        if handed:
            path, _, name = around[0].rpartition("::")
            more = f" and {len(around) - 1} more" if len(around) > 1 else ""
            return (f"no fix: {dotted(func) or 'the loss'}() is handed in, and {name} ({path}){more} computes "
                    "binary_cross_entropy, which CUDA autocast refuses (\"unsafe to autocast\")")
    return ""


def _parameters(function: ast.AST) -> set[str]:
    args = function.args  # type: ignore[attr-defined]
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def _line(statement: ast.stmt) -> object:
    """What LibCST counts as one line of a block: simple statements sharing a line (`a; b`) are one."""
    return id(statement) if isinstance(statement, _COMPOUND) else statement.lineno


def _refused_ops(ctx: AstContext, line: list[ast.stmt]) -> tuple[list[ast.Call], list[str]]:
    """binary_cross_entropy called on `line` (F.binary_cross_entropy, a BCELoss instance), and the
    functions of the file it calls by name that compute it inside."""
    names = ctx.names
    module_functions = {s.name: s for s in ctx.tree.body if isinstance(s, _FUNCTIONS)}
    direct: list[ast.Call] = []
    indirect: list[str] = []
    for call in (c for statement in line for c in _in_order(ctx, statement, ast.Call)):
        assert isinstance(call, ast.Call)
        func = call.func
        if ctx.qualname(func) in BCE_FUNCTIONS:
            direct.append(call)
            continue
        value: Optional[ast.expr] = None
        if isinstance(func, ast.Name):
            value = single_value(func, names)
            target = module_functions.get(func.id)
            # it spells binary_cross_entropy or BCELoss, or calls a module-level BCELoss instance or such a
            # function of the file (FileFacts.bce_losses: U-2-Net's `muti_bce_loss_fusion` calls `bce_loss(...)`)
            if target is not None and names.binding_scope(func) is names.module_scope \
                    and (_BCE_TEXT.search(_code_with_comments(ctx, target)) or func.id in ctx.project.own.bce_losses):
                indirect.append(func.id)
        elif isinstance(func, ast.Attribute):
            value = self_attribute_value(ctx, func)
        if isinstance(value, ast.Call) and ctx.qualname(value.func) in BCE_MODULES:
            direct.append(call)
    return direct, indirect


def _code_with_comments(ctx: AstContext, function: ast.AST) -> str:
    """The function's code with its decorators and the comment lines right above it (what LibCST's
    `code_for_node` gives)."""
    decorators = getattr(function, "decorator_list", [])
    row = min([function.lineno] + [d.lineno for d in decorators])  # type: ignore[attr-defined]
    while row > 1:
        above = ctx.line(row - 1).strip(" \t\f\v")
        if above and not above.startswith("#"):
            break
        row -= 1
    start = ctx.offset(row, 0)
    end = ctx.offset(function.end_lineno or function.lineno,  # type: ignore[attr-defined]
                     function.end_col_offset or 0)  # type: ignore[attr-defined]
    return ctx.text[start:end]


def _in_order(ctx: AstContext, root: ast.AST, kind: type) -> list[ast.AST]:
    """The nodes of one kind under `root` (itself included), in source order."""
    found = [n for n in walk_nodes(root) if isinstance(n, kind)]
    found.sort(key=lambda n: ctx.order(n) or 0)
    return found


# -- outputs read as numpy ----------------------------------------------------------------------------------
def numpy_hazard(ctx: AstContext, region: AstRegion) -> str:
    """What reads a value the region computes with `.numpy()` or a numpy function, no cast on the way, in the region or
    after it in the same block: a call there (`np.percentile(grad.cpu(), q)`), a function of the file or of a project
    module it imports handed that value (`iou_score(output, target)`, whose `torch.sigmoid(output).data.cpu()
    .numpy()` raises on a bfloat16 output), or a model `forward` of the file or of a module it imports that reads a
    value it computes so (project/clamps.py); "" when nothing does."""
    bound = {n.id for statement in region.statements for n in walk_nodes(statement)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    statements = [*region.statements, *(s for line in region.lines[region.end + 1:] for s in line)]
    project = ctx.project
    local = project.own.numpy_readers  # the file's own, read by the project pass
    if not bound:
        return ""
    if project.own.forward_reads_numpy or project.numpy_forward_importees:
        return "the model's forward reads a value it computes with numpy"
    if not (local or project.numpy_readers or "numpy" in ctx.text):
        return ""
    if reads_as_numpy(statements, bound, ctx.names.qualified):
        return "the step reads its output with numpy"
    for statement in statements:
        for node in walk_nodes(statement):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            read = local.get(func.id, ()) if isinstance(func, ast.Name) else ()
            read = read or project.numpy_readers.get(ctx.qualname(func) or "", ())
            if any(i < len(node.args) and _uses(node.args[i], bound) for i in read):
                return f"{ctx.segment(func)}() reads the output it is handed with numpy"
    return ""


def _uses(argument: ast.expr, bound: set[str]) -> bool:
    """The argument is a value the region binds, or part of one (`output`, `outputs[-1]`)."""
    return any(isinstance(n, ast.Name) and n.id in bound for n in walk_nodes(argument))


# -- constants float16 cannot hold -------------------------------------------------------------------------
def float16_hazard(ctx: AstContext, statements: list[ast.stmt]) -> Optional[Hazard]:
    """The first constant float16 cannot hold in the region's statements, in the functions of this file
    they call by name, or in a `forward` method of a class of this file (the model may be one)."""
    found, called = _constants(ctx, statements)
    if found:
        return found[0]
    functions = {s.name: s for s in ctx.tree.body if isinstance(s, _FUNCTIONS)}
    targets = [functions[name] for name in dict.fromkeys(called) if name in functions]
    forwards = [item for cls in ctx.tree.body if isinstance(cls, ast.ClassDef)
                for item in cls.body if isinstance(item, _FUNCTIONS) and item.name == "forward"]
    for function in [*targets, *forwards]:
        inner, _ = _constants(ctx, function.body)
        if inner:
            return inner[0]
    if ctx.project.float16_overflow_importees:
        return Hazard("a literal in the forward of a module it imports", "overflows")
    return None


def _constants(ctx: AstContext, statements: list[ast.stmt]) -> tuple[list[Hazard], list[str]]:
    """Float literals float16 flushes to zero or overflows, and the names called, in source order."""
    hazards: list[Hazard] = []
    called: list[str] = []
    for statement in statements:
        for node in _in_order(ctx, statement, ast.expr):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.append(node.func.id)
            elif isinstance(node, ast.Constant) and type(node.value) is float:
                value = abs(node.value)
                if 0.0 < value < FLOAT16_TINY:
                    hazards.append(Hazard(ctx.segment(node), "flushes to zero"))
                elif value > FLOAT16_MAX and value != float("inf"):
                    hazards.append(Hazard(ctx.segment(node), "overflows"))
    return hazards, called


# -- the GradScaler ----------------------------------------------------------------------------------------
def scaler_plan(ctx: AstContext, facts: AmpRegions, step: AmpStep, backward: AmpBackward) -> bool:
    """One GradScaler can drive the step: one backward and one optimizer step after it, no fused SGD with
    momentum, and every gradient use between them on a statement of the step's block (where `unscale_`
    can go)."""
    if len(step.backwards) != 1 or len(step.steps) != 1 or backward.scaled:
        return False
    if optimizer_wrapper(ctx, step):
        return False  # `scaler.step(wrapper)`: GradScaler reads the param_groups of a torch optimizer
    opt_step = step.steps[0]
    call = opt_step.call
    if opt_step.via_scaler or call.args or call.keywords or not facts.before(backward.call, call):
        return False
    if _fused_sgd_with_momentum(ctx, opt_step.optimizer) or ctx.project.fused_sgd:
        return False  # fused SGD with momentum here or in a module of the project: unsafe under a scaler
    if not isinstance(ctx.parent(call), ast.Expr):
        return False
    if ctx.qualname(backward.call.func) == AUTOGRAD_BACKWARD:
        arguments = [*backward.call.args, *backward.call.keywords]
        if len(arguments) != 1 or any(k.arg is not None and k.arg != "tensors" for k in backward.call.keywords):
            return False
    step_statement = line_statement(ctx, call)
    container = _block_of(ctx, step_statement)
    if container is None or _is_elif(ctx, step_statement):
        return False  # LibCST holds an `elif` in its `if`, not in a block the scaler's statements can join
    backward_line = _line(ctx.statement(backward.call))
    for node in _in_order(ctx, step.node, ast.expr):
        if not _grad_use(node) or not (facts.before(backward.call, node) and facts.before(node, call)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unscale_":
            return False
        holder = _statement_in(ctx, node, container)
        if holder is None or facts.contains(holder, backward.call) or _line(holder) == backward_line:
            return False  # `.grad` used on every micro-step but stepped on a boundary: unscale_ can't go there
    return True


def _grad_use(node: ast.AST) -> bool:
    """`x.grad`, gradient clipping, `scaler.unscale_(...)`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "grad"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        return name.startswith("clip_grad") or name == "unscale_"
    return False


def line_statement(ctx: AstContext, node: ast.AST) -> ast.stmt:
    """The statement holding `node` as LibCST's `statement_of` finds it: a simple statement written on its
    compound statement's header line (`if done: opt.step()`) counts as that compound statement."""
    statement = ctx.statement(node)
    if isinstance(statement, _COMPOUND) or not _in_suite(ctx, statement):
        return statement
    return next(a for a in ctx.ancestors(statement) if isinstance(a, ast.stmt))  # past `except`, `case`


def _is_elif(ctx: AstContext, statement: ast.stmt) -> bool:
    parent = ctx.parent(statement)
    return isinstance(parent, ast.If) and len(parent.orelse) == 1 and parent.orelse[0] is statement \
        and ctx.line(statement.lineno)[ctx.column(statement.lineno, statement.col_offset):].startswith("elif")


def _in_suite(ctx: AstContext, statement: ast.stmt) -> bool:
    held = _block_of(ctx, statement)
    if held is None or isinstance(ctx.parent(statement), ast.Module):
        return False
    first = held[0]
    prefix = ctx.line(first.lineno)[:ctx.column(first.lineno, first.col_offset)]
    return bool(prefix.strip())


def _block_of(ctx: AstContext, statement: ast.stmt) -> Optional[list[ast.stmt]]:
    owner = ctx.parent(statement)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(owner, name, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return None


def _statement_in(ctx: AstContext, node: ast.AST, container: list[ast.stmt]) -> Optional[ast.stmt]:
    """The statement of `container` that holds `node` (None outside it, or on a one-line suite)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, ast.stmt) and any(s is ancestor for s in container):
            return None if _in_suite(ctx, ancestor) else ancestor
    return None


def scaler_refusal(ctx: AstContext, step: AmpStep) -> str:
    """Why `scaler_plan` found no way to add a GradScaler, in one claim."""
    wrapper = optimizer_wrapper(ctx, step)
    if wrapper:
        return wrapper
    if any(_fused_sgd_with_momentum(ctx, s.optimizer) for s in step.steps) or ctx.project.fused_sgd:
        return "fused SGD with momentum is built in or around this file, and a skipped scaled step corrupts it"
    if len(step.backwards) > 1:
        return f"the step calls backward() {len(step.backwards)} times, and one GradScaler path cannot serve them"
    if len(step.steps) > 1:
        return f"the step steps {len(step.steps)} optimizers, and one GradScaler path cannot serve them"
    return "the step's gradients are used between backward() and step() where a GradScaler cannot unscale them"


# what torch.optim.Optimizer offers; a call of anything else on the optimizer a step steps shows a wrapper
OPTIMIZER_API = frozenset({
    "step", "zero_grad", "state_dict", "load_state_dict", "add_param_group", "param_groups", "state", "defaults",
    "register_step_pre_hook", "register_step_post_hook", "register_state_dict_pre_hook",
    "register_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
})
# attributes under which a wrapper keeps the optimizer it wraps (`optimizer._optimizer.param_groups`)
_WRAPPED = frozenset({"optimizer", "_optimizer", "opt", "_opt", "optim", "_optim", "base_optimizer"})


def optimizer_wrapper(ctx: AstContext, step: AmpStep) -> str:
    """Why the optimizer a step steps is not shown to be a torch optimizer, in one claim; "" when nothing says so.
    A GradScaler reads the optimizer's `param_groups` (`unscale_`) and steps it through `scaler.step(opt)`, which
    a learning-rate wrapper without them fails (AttributeError: blind12, kaituoxu/Speech-Transformer's
    TransformerOptimizer, checked with torch 2.13 on the CPU), so GPU001 and GPU002 offer no GradScaler fix
    where: the optimizer is an instance of a class of the file over `object` alone that never names
    `param_groups`, or the file calls on it a method torch optimizers lack (`optimizer.update_lr()`,
    `self.optimizer.set_visdom(...)`) or reads the optimizer it wraps (`optimizer._optimizer`). The same
    spelling counts in the step's class for `self.optimizer`, in the step's function (or module code) for a
    name."""
    for opt_step in step.steps:
        optimizer = opt_step.optimizer
        spelled = dotted(optimizer)
        if spelled is None:
            continue
        value: Optional[ast.expr] = None
        if isinstance(optimizer, ast.Name):
            value = single_value(optimizer, ctx.names)
        elif isinstance(optimizer, ast.Attribute):
            value = self_attribute_value(ctx, optimizer)
        cls = _wrapper_class(ctx, value)
        if cls is not None:
            return (f"the optimizer stepped, `{spelled}`, is a {cls}, a class of this file without param_groups, "
                    "which a GradScaler reads (unscale_, step)")
        where = _optimizer_scope(ctx, optimizer)
        for node in all_nodes(where):
            if not (isinstance(node, ast.Attribute) and dotted(node.value) == spelled) \
                    or node.attr in OPTIMIZER_API or node.attr.startswith("__"):
                continue
            parent = ctx.parent(node)
            called = isinstance(parent, ast.Call) and parent.func is node
            if called or node.attr in _WRAPPED:
                use = f"{node.attr}()" if called else node.attr
                return (f"the optimizer stepped, `{spelled}`, is not shown to be a torch optimizer (torch optimizers "
                        f"have no `{use}`), and a GradScaler reads a torch optimizer's param_groups")
    return ""


def _wrapper_class(ctx: AstContext, value: Optional[ast.expr]) -> Optional[str]:
    """The name of the class `value` builds when it is a module-level class of the file over `object` alone
    whose body never names `param_groups`."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    for statement in ctx.tree.body:
        if isinstance(statement, ast.ClassDef) and statement.name == value.func.id:
            if statement.keywords or any(not (isinstance(b, ast.Name) and b.id == "object") for b in statement.bases):
                return None
            named = any(isinstance(n, ast.Attribute) and n.attr == "param_groups"
                        or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "param_groups"
                        or isinstance(n, ast.Name) and n.id == "param_groups"
                        or isinstance(n, ast.Constant) and n.value == "param_groups" for n in walk_nodes(statement))
            return None if named else statement.name
    return None


def _optimizer_scope(ctx: AstContext, optimizer: ast.expr) -> ast.AST:
    """Where the spelling of the optimizer means the same object: the step's class for `self.x`, else the
    step's function (module code: the module)."""
    function = ctx.enclosing_function(optimizer)
    if isinstance(optimizer, ast.Attribute) and function is not None:
        cls = ctx.parent(function)
        if isinstance(cls, ast.ClassDef):
            return cls
    return function if function is not None else ctx.tree


def fused_optimizer(ctx: AstContext, step: AmpStep) -> bool:
    """An optimizer the step steps is built with `fused=True` (or a fused value other than False/None)."""
    for opt_step in step.steps:
        value = single_value(opt_step.optimizer, ctx.names) if isinstance(opt_step.optimizer, ast.Name) else None
        if isinstance(value, ast.Call):
            kwargs = ctx.kwargs(value)
            if kwargs.has("fused") and not is_literal(ctx, kwargs.get("fused"), "False", "None"):
                return True
    return False


def _fused_sgd_with_momentum(ctx: AstContext, optimizer: ast.expr) -> bool:
    """Fused SGD with momentum leaves its momentum buffer uninitialised when the first scaled step
    overflows (weights blew up within 3 steps on torch 2.14): never pair it with a GradScaler."""
    value = single_value(optimizer, ctx.names) if isinstance(optimizer, ast.Name) else None
    if not isinstance(value, ast.Call) or ctx.qualname(value.func) not in _SGD:
        return False
    kwargs = ctx.kwargs(value)
    if not kwargs.complete:
        return True
    fused, momentum = kwargs.get("fused"), kwargs.get("momentum")
    return kwargs.has("fused") and not is_literal(ctx, fused, "False", "None") and kwargs.has("momentum") \
        and not is_literal(ctx, momentum, "0")


def scaler_class_name(ctx: AstContext) -> str:
    """The class name the fix writes: GradScaler, or under FSDP ShardedGradScaler as the file can name it
    (core/pending.py ImportPlanner.reference with prefer_from spells the same)."""
    if "fsdp" not in ctx.project.parallelism:
        return "GradScaler"
    name = "ShardedGradScaler"
    names = ctx.names
    qualified = f"{SHARDED_SCALER_MODULE}.{name}"
    bound = {alias: targets[0] if len(set(targets)) == 1 and LOCAL not in targets else None
             for alias, targets in names.module_scope.bindings.items()}
    for alias, target in bound.items():
        if target == qualified:
            return alias
    taken = taken_names(names)
    reaches = any(target is not None and (target == SHARDED_SCALER_MODULE or (
        target == "torch" and SHARDED_SCALER_MODULE.startswith(REACHABLE_FROM_TORCH))) for target in bound.values())
    if name not in taken or reaches or "torch" not in taken:
        return name
    alias = name
    while alias in taken:
        alias = f"{SHARDED_SCALER_MODULE.split('.')[-1]}_{alias}"
    return alias


class _Scoped(Protocol):
    """A name table on either tree (AstNames here, core.names.NameTable where LibCST builds the fix)."""

    @property
    def scopes(self) -> Mapping[int, Any]: ...


def taken_names(names: _Scoped) -> set[str]:
    """Every name the file binds, in any scope: a name the fix adds must be none of them."""
    taken: set[str] = set()
    for scope in names.scopes.values():
        taken.update(scope.bindings)
    return taken


def free_name(taken: set[str], candidates: tuple[str, ...]) -> str:
    """The first candidate not taken, else the first with a number: `scaler_2`."""
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    index = 1
    while f"{candidates[0]}_{index}" in taken:
        index += 1
    return f"{candidates[0]}_{index}"


def torch_alias(names: AstNames) -> Optional[str]:
    """The name the file imports torch as at module level, None when it does not (the fix adds the import)."""
    for alias, targets in names.module_scope.bindings.items():
        if len(set(targets)) == 1 and targets[0] == "torch":
            return alias
    return None


# -- where the scaler lives (rewrites/amp_plan.py scaler_home builds it) ------------------------------------
def _scaler_recreated(ctx: AstContext, facts: AmpRegions, step: AmpStep) -> bool:
    """The scaler goes before the step's loop in a function the file calls more than once or from a loop,
    and has no home beside the optimizer: each call creates a new one."""
    function = facts.scope_of(step.node)
    if not isinstance(function, _FUNCTIONS) or isinstance(step.node, _FUNCTIONS):
        return False
    return _scaler_home(ctx, facts, step, function) is None and _runs_repeatedly(ctx, facts, function)


def _runs_repeatedly(ctx: AstContext, facts: AmpRegions, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The file calls `function` from a loop or from more than one place (a per-epoch `train()`)."""
    name = function.name
    calls = [c for c in facts.calls if (isinstance(c.func, ast.Name) and c.func.id == name)
             or (isinstance(c.func, ast.Attribute) and c.func.attr == name)]
    if len(calls) > 1:
        return True
    return any(isinstance(a, _LOOPS) for call in calls for a in ctx.ancestors(call)
               if not facts.contains(a, function))


def _scaler_home(ctx: AstContext, facts: AmpRegions, step: AmpStep, function: ast.AST) -> Optional[ast.stmt]:
    """The statement the scaler is created after, beside the optimizer (a module global, or in the one
    function that makes the optimizer and passes it to the step's); None to create it before the loop."""
    optimizer = step.steps[0].optimizer
    if not isinstance(optimizer, ast.Name):
        return None
    names = ctx.names
    owner = names.binding_scope(optimizer)
    if owner is None:
        return None
    if owner is names.module_scope:
        value = single_value(optimizer, names)
        creation = line_statement(ctx, value) if value is not None else None
        if creation is None or isinstance(creation, _COMPOUND) or _function_of(facts, creation) is not None:
            return None
        return creation
    if owner is not names.scopes.get(id(function)) or not _parameter_visible(ctx, facts, optimizer, step.node):
        return None
    return _caller_home(ctx, facts, function, optimizer.id)


def _function_of(facts: AmpRegions, node: ast.AST) -> Optional[ast.AST]:
    scope = facts.scope_of(node)
    return scope if isinstance(scope, _FUNCTIONS) else None


def _parameter_visible(ctx: AstContext, facts: AmpRegions, name: ast.Name, anchor: ast.AST) -> bool:
    """`name` is a parameter of a function that holds `anchor` (never rebound there)."""
    owner = ctx.names.binding_scope(name)
    if owner is None or not isinstance(owner.node, _FUNCTIONS) or not facts.contains(owner.node, anchor):
        return False
    args = owner.node.args
    params = {p.arg for p in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return name.id in params and len(owner.bindings.get(name.id, [])) == 1 \
        and owner.values.get(name.id, []) == [None]


def _caller_home(ctx: AstContext, facts: AmpRegions, function: ast.AST, parameter: str) -> Optional[ast.stmt]:
    assert isinstance(function, _FUNCTIONS)
    names = ctx.names
    args = function.args
    params = [*args.posonlyargs, *args.args]
    scaler = free_name(taken_names(names), ("scaler", "grad_scaler", "amp_scaler"))
    if any(p.arg == scaler for p in (*params, *args.kwonlyargs)):
        return None
    if names.module_scope.bindings.get(function.name) != [LOCAL] or _function_of(facts, function) is not None:
        return None  # not a plain module-level function
    position = next((i for i, p in enumerate(params) if p.arg == parameter), None)
    calls = [c for c in facts.calls if isinstance(c.func, ast.Name) and c.func.id == function.name
             and names.binding_scope(c.func) is names.module_scope]
    if not calls:
        return None
    home_scope = facts.scope_of(calls[0])
    creation: Optional[ast.stmt] = None
    for call in calls:
        if facts.scope_of(call) is not home_scope or home_scope is function:
            return None
        argument = _argument(call, parameter, position)
        if not isinstance(argument, ast.Name) or names.binding_scope(argument) is not _scope(names, home_scope):
            return None
        value = single_value(argument, names)
        statement = line_statement(ctx, value) if value is not None else None
        if statement is None or (creation is not None and statement is not creation):
            return None
        if not facts.before(statement, call):
            return None
        creation = statement
    if creation is None or isinstance(creation, _COMPOUND):
        return None
    return creation


def _scope(names: AstNames, node: ast.AST) -> Optional[AstScope]:
    return names.scopes.get(id(node))


def _argument(call: ast.Call, parameter: str, position: Optional[int]) -> Optional[ast.expr]:
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return keyword.value
    if position is None or any(isinstance(a, ast.Starred) for a in call.args[:position + 1]) \
            or len(call.args) <= position:
        return None
    return call.args[position]


# -- where the scaler is created (rewrites/amp_plan.py scaler_anchor) ---------------------------------------
def scaler_anchor(ctx: AstContext, node: StepNode) -> ast.stmt:
    """The statement the scaler is created before: the outermost loop of the function holding the step,
    or for a step function without a loop, that function (or its class) in the enclosing code."""
    anchor: ast.stmt = node
    if isinstance(node, _FUNCTIONS):
        for ancestor in ctx.ancestors(node):
            if not isinstance(ancestor, ast.ClassDef):
                break
            anchor = ancestor
        return anchor
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (*CODE_SCOPES, ast.Module)):
            break
        if isinstance(ancestor, _LOOPS):
            anchor = ancestor
    return anchor


# -- GPU002: a GradScaler for a float16 autocast step -----------------------------------------------------
def scaler_fix(ctx: AstContext, facts: AmpRegions, step: AmpStep, backward: AmpBackward, autocast: ast.expr,
               maybe: bool) -> FixForecast:
    """GPU002's fix for the step under `autocast` (the first autocast covering its loss); `maybe`: the dtype
    is chosen at run time from a table holding float16, so the scaler is enabled only for float16."""
    enabled: Optional[str] = None
    if maybe:
        dtype = (autocast_arguments(ctx, autocast) or {}).get("dtype") if isinstance(autocast, ast.Call) else None
        torch = torch_alias(ctx.names)
        if not isinstance(dtype, ast.Name) or torch is None:
            return refused("no fix: the dtype is not a plain name a scaler's enabled= can test")
        enabled = f"{dtype.id} == {torch}.float16"
    parallel = ctx.project.parallelism
    if "tensor-parallel" in parallel:
        return refused("no fix: a GradScaler does not agree on inf/NaN across tensor-parallel ranks; use bfloat16")
    if "fsdp" in parallel and fused_optimizer(ctx, step):
        return refused("no fix: a fused optimizer under FSDP's ShardedGradScaler skips the cross-rank inf check; "
                       "use bfloat16 (bench/fsdp_fused_scaler.py)")
    if not scaler_plan(ctx, facts, step, backward):
        return refused(f"no fix: {scaler_refusal(ctx, step)}")
    if enabled is not None and not _assigned_before(ctx, enabled.split(" ", 1)[0], scaler_anchor(ctx, step.node)):
        return refused("no fix: the dtype is chosen after the point where the scaler would be created")
    symbol = floors.SHARDED_GRAD_SCALER if "fsdp" in parallel else floors.GRAD_SCALER
    too_new = floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling, [symbol])
    if too_new is not None:
        return refused(f"no fix: {too_new.reason()}")
    message = f"Scale the loss with a {scaler_class_name(ctx)}" + (" enabled for float16" if enabled else "")
    return FixForecast(message, decisions={"enabled": enabled})


def _assigned_before(ctx: AstContext, name: str, anchor: ast.stmt) -> bool:
    """A module-level line before `anchor` assigns `name` (`ptdtype = {...}[dtype]`)."""
    for line in ctx.tree.body:
        if (ctx.order(anchor) or 0) < (ctx.order(line) or 0):
            break
        if isinstance(line, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in line.targets):
            return True
    return False
