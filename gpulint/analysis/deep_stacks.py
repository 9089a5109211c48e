"""Deep stacks of blocks and how forward runs them: the facts GPU301 (activation checkpointing) needs.

Activation checkpointing pays off on deep stacks of blocks with parameters. This module
answers, statically and conservatively: does a module class's `__init__` build an
`nn.Sequential` / `nn.ModuleList` of many compute blocks (and how many, when the file shows
it); where do `forward` and the methods it calls run that stack; and is the class already
checkpointed or used only for inference. Anything unclear means "no".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from gpulint.analysis.nn_modules import (
    MAX_EVAL_DEPTH,
    FunctionTree,
    ancestors_in,
    forward_methods,
    function_tree,
    grad_off_decorated,
    is_builtin,
    is_range_call,
    local_class_name,
    methods,
    module_classes,
    range_length,
    self_attribute,
    self_name,
    under_grad_off,
)
from gpulint.core.context import FileContext
from gpulint.core.names import NameUses
from gpulint.core.torch_api import CHECKPOINT_FUNCTIONS, MODULE_LIST, SEQUENTIAL
from gpulint.core.values import single_value
from gpulint.core.walk import walk

# torch.nn layers that count as one block of a stack: they hold parameters and save sizeable
# activations for backward. Activations, dropout, normalisation (it rides along with a compute
# layer: counting it would count one block twice), pooling, reshaping and embeddings (they save
# indices only) do not count.
HEAVY_LAYERS = frozenset({
    "Linear", "Bilinear", "LazyLinear",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
    "RNN", "LSTM", "GRU",
})

# Whole-model checkpointing applied from outside the class: torch's wrapper API, Hugging Face,
# timm. When a file uses any of these we assume its stacks are covered.
_EXTERNAL_CHECKPOINTING = re.compile(
    r"\b(?:checkpoint_wrapper|apply_activation_checkpointing|gradient_checkpointing_enable|"
    r"enable_gradient_checkpointing|set_grad_checkpointing)\b"
)

# Any mention inside a class: a `use_checkpoint` flag, a helper that checkpoints, HF's
# `self.gradient_checkpointing`: the author already decides about checkpointing there.
_CHECKPOINT_WORDS = re.compile(r"checkpoint|ckpt", re.IGNORECASE)

_TRAINING = re.compile(r"\.backward\(|\bautograd\.grad\(|\btorch\.optim\b|\boptim\.|\boptimizer\b|\bTrainer\b")

_INFERENCE = re.compile(r"\bno_grad\b|\binference_mode\b|\.eval\(\)|requires_grad_\(False\)")

HEAVY, BLOCK, LIGHT = "heavy", "block", "light"

def block_kind(ctx: FileContext, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> str:
    """HEAVY: a recognised compute layer or a block of this file with parameters; BLOCK: a class
    imported from outside torch (a block when repeated, unknown otherwise); LIGHT: anything else."""
    if isinstance(expr, cst.Name):
        value = single_value(expr, ctx.names)
        return block_kind(ctx, value, seen) if isinstance(value, cst.Call) else LIGHT
    if not isinstance(expr, cst.Call):
        return LIGHT
    qualified = ctx.qualname(expr.func)
    if qualified == "copy.deepcopy" and expr.args:
        return block_kind(ctx, expr.args[0].value, seen)
    if qualified is not None and qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional"):
        layer = qualified.rsplit(".", 1)[-1]
        if layer == SEQUENTIAL:
            kinds = [block_kind(ctx, arg.value, seen) for arg in expr.args if not arg.star]
            return HEAVY if HEAVY in kinds else LIGHT
        return HEAVY if layer in HEAVY_LAYERS else LIGHT
    if isinstance(expr.func, cst.Name) and qualified is None:
        name = local_class_name(ctx, expr.func)
        cls = module_classes(ctx).get(name) if name is not None else None
        if cls is None or name is None or name in seen:
            return LIGHT
        memo = ctx.analysis(_parameter_memo)
        if name not in memo:
            memo[name] = _has_parameters(ctx, cls, seen | {name})
        return HEAVY if memo[name] else LIGHT
    if qualified is not None and qualified.split(".", 1)[0] != "torch":
        last = qualified.rsplit(".", 1)[-1]
        return BLOCK if last[:1].isupper() else LIGHT
    return LIGHT

def _parameter_memo(ctx: FileContext) -> dict[str, bool]:
    """Per file: whether each local module class holds parameters (asked once per class)."""
    return {}

def _has_parameters(ctx: FileContext, cls: cst.ClassDef, seen: frozenset[str]) -> bool:
    """The class's __init__ builds a compute layer, a parameter-holding block, or an nn.Parameter."""
    init = methods(cls).get("__init__")
    if init is None:
        return False
    for node in function_tree(init).nodes:
        if isinstance(node, cst.Call):
            if ctx.qualname(node.func) in {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
                return True
            if block_kind(ctx, node, seen) == HEAVY:
                return True
    return False

@dataclass
class Depth:
    """Blocks in a stack: `known` counted; `unknown` when some repeat a number of times the file doesn't show."""

    known: int = 0
    unknown: bool = False

    def add(self, kind: str, count: Optional[int], repeated: bool) -> None:
        if kind == HEAVY or (kind == BLOCK and repeated):
            if count is None:
                self.unknown = True
            else:
                self.known += count

@dataclass
class Stack:
    cls: cst.ClassDef
    attr: str
    kind: str  # SEQUENTIAL or MODULE_LIST
    construction: cst.Call
    statement: cst.BaseStatement
    depth: Depth

def stacks_in(ctx: FileContext, cls: cst.ClassDef) -> list[Stack]:
    """Sequential / ModuleList stacks assigned to `self.<attr>` once in `__init__`, with their depth."""
    init = methods(cls).get("__init__")
    me = self_name(init) if init is not None else None
    if init is None or me is None:
        return []
    tree = function_tree(init)
    assigned: dict[str, int] = {}
    found: list[tuple[str, str, cst.Call, cst.SimpleStatementLine]] = []
    for node in tree.nodes:
        targets: list[cst.BaseExpression] = []
        value: Optional[cst.BaseExpression] = None
        if isinstance(node, cst.Assign):
            targets, value = [t.target for t in node.targets], node.value
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets, value = [node.target], getattr(node, "value", None)
        for target in targets:
            attr = self_attribute(target, me)
            if attr is None:
                continue
            assigned[attr] = assigned.get(attr, 0) + 1
            if isinstance(node, cst.Assign) and len(targets) == 1 and isinstance(value, cst.Call):
                layer = _container(ctx, value)
                line = next((a for a in ancestors_in(tree, node) if isinstance(a, cst.SimpleStatementLine)), None)
                if layer is not None and line is not None:
                    found.append((attr, layer, value, line))
    out = []
    for attr, layer, call, statement in found:
        if assigned[attr] != 1:
            continue  # built in several places: which one runs is not clear
        depth = Depth()
        if not _container_depth(ctx, init, tree, call, layer, depth):
            continue
        if layer == MODULE_LIST and not _appends(ctx, init, tree, me, attr, depth):
            continue
        out.append(Stack(cls, attr, layer, call, statement, depth))
    return out

def _container(ctx: FileContext, call: cst.Call) -> Optional[str]:
    qualified = ctx.qualname(call.func) or ""
    if qualified.startswith("torch.nn."):
        last = qualified.rsplit(".", 1)[-1]
        if last in (SEQUENTIAL, MODULE_LIST):
            return last
    return None

def _container_depth(ctx: FileContext, fn: cst.FunctionDef, tree: FunctionTree, call: cst.Call, layer: str,
                     depth: Depth) -> bool:
    """Add the blocks passed to the constructor; False when the arguments are not understood."""
    if any(arg.keyword is not None for arg in call.args):
        return False
    if layer == MODULE_LIST:
        if len(call.args) > 1:
            return False
        return not call.args or _expand(ctx, fn, tree, call.args[0].value, depth)
    for arg in call.args:
        if arg.star == "*":
            if not _expand(ctx, fn, tree, arg.value, depth):
                return False
        elif arg.star:
            return False
        else:
            depth.add(block_kind(ctx, arg.value), 1, repeated=False)
    return True

def _expand(ctx: FileContext, fn: cst.FunctionDef, tree: FunctionTree, expr: cst.BaseExpression, depth: Depth,
            level: int = 0) -> bool:
    """Add the blocks of a list expression: a literal, a comprehension, or a list built in __init__."""
    if level > MAX_EVAL_DEPTH:
        return False
    if isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            if isinstance(element, cst.StarredElement):
                if not _expand(ctx, fn, tree, element.value, depth, level + 1):
                    return False
            else:
                depth.add(block_kind(ctx, element.value), 1, repeated=False)
        return True
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        comp = expr.for_in
        if comp.ifs or comp.inner_for_in is not None or comp.asynchronous is not None:
            return False
        if not is_range_call(ctx, comp.iter):
            return False
        depth.add(block_kind(ctx, expr.elt), range_length(ctx, comp.iter, fn), repeated=True)
        return True
    if isinstance(expr, cst.Call) and is_builtin(ctx, expr.func, "list") and len(expr.args) == 1:
        return _expand(ctx, fn, tree, expr.args[0].value, depth, level + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _expand(ctx, fn, tree, expr.left, depth, level + 1) and _expand(ctx, fn, tree, expr.right, depth,
                                                                                level + 1)
    if isinstance(expr, cst.Name):
        owner = ctx.names.binding_scope(expr)
        value = single_value(expr, ctx.names)
        if owner is None or value is None or owner is not ctx.names.scopes.get(id(fn)):
            return False
        if not _expand(ctx, fn, tree, value, depth, level + 1):
            return False
        return _list_mutations(ctx, fn, tree, ctx.names.mutations_of(owner, expr.value), depth)
    return False

def _list_mutations(ctx: FileContext, fn: cst.FunctionDef, tree: FunctionTree, nodes: list[cst.CSTNode],
                    depth: Depth) -> bool:
    """`layers.append(Block())` (in loops over ranges) adds blocks; any other change is not understood."""
    for node in nodes:
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
            return False
        if id(node) not in tree.parent:
            return False  # changed in a nested function
        method = node.func.attr.value
        if method in {"__len__", "copy"}:
            continue
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return False
        times = _repetitions(ctx, fn, tree, node)
        if method == "append":
            depth.add(block_kind(ctx, node.args[0].value), times, repeated=True)
        elif method == "extend":
            inner = Depth()
            if not _expand(ctx, fn, tree, node.args[0].value, inner):
                return False
            depth.known += inner.known * (times or 0)
            depth.unknown = depth.unknown or inner.unknown or (times is None and (inner.known > 0))
        else:
            return False
    return True

def _appends(ctx: FileContext, fn: cst.FunctionDef, tree: FunctionTree, me: str, attr: str, depth: Depth) -> bool:
    """Blocks appended to `self.<attr>` in __init__ (ModuleList built by a loop)."""
    calls: list[cst.CSTNode] = []
    for node in tree.nodes:
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
            continue
        if self_attribute(node.func.value, me) == attr:
            calls.append(node)
    return _list_mutations(ctx, fn, tree, calls, depth)

def _repetitions(ctx: FileContext, fn: cst.FunctionDef, tree: FunctionTree, node: cst.CSTNode) -> Optional[int]:
    """How many times a statement runs in __init__: product of the enclosing `for _ in range(n)` loops."""
    times: Optional[int] = 1
    for ancestor in ancestors_in(tree, node):
        if ancestor is fn:
            break
        if isinstance(ancestor, cst.For):
            if not is_range_call(ctx, ancestor.iter):
                return None
            n = range_length(ctx, ancestor.iter, fn)
            times = None if n is None or times is None else times * n
        elif isinstance(ancestor, (cst.If, cst.While, cst.Try, cst.IfExp)):
            return None
    return times

@dataclass
class Run:
    """One place where forward (or a method it calls) runs a stack."""

    method: cst.FunctionDef
    call: cst.Call  # `self.X(x)`, `blk(x)` or `self.X[i](x)`
    callee: cst.BaseExpression  # `self.X`, `blk`, `self.X[i]`
    per_block: bool  # the call runs one block (loop), not the whole stack
    statement: Optional[cst.SimpleStatementLine]  # `y = self.X(x)` / `return self.X(x)` when it is the whole line
    bare_value: bool  # the call is a whole assigned/returned value or argument: no parentheses needed

@dataclass
class StackUse:
    runs: list[Run] = field(default_factory=list)
    unclear: bool = False  # used in a way we don't understand: report, but offer no fix
    checkpointed: bool = False  # the stack or its blocks are passed to torch's checkpoint somewhere

def stack_use(ctx: FileContext, cls: cst.ClassDef, attr: str) -> StackUse:
    use = StackUse()
    for fn in forward_methods(cls):
        me = self_name(fn)
        if grad_off_decorated(ctx, fn):
            continue
        tree = function_tree(fn)
        for node in tree.nodes:
            if isinstance(node, cst.Attribute) and self_attribute(node, me) == attr:
                _classify(ctx, tree, fn, node, use)
    return use

def _passed_to_checkpoint(ctx: FileContext, tree: FunctionTree, expr: cst.CSTNode) -> bool:
    parent = tree.parent.get(id(expr))
    if not isinstance(parent, cst.Arg):
        return False
    holder = tree.parent.get(id(parent))
    return isinstance(holder, cst.Call) and ctx.qualname(holder.func) in CHECKPOINT_FUNCTIONS

def _classify(ctx: FileContext, tree: FunctionTree, fn: cst.FunctionDef, ref: cst.Attribute, use: StackUse) -> None:
    parent = tree.parent.get(id(ref))
    if isinstance(parent, cst.Call) and parent.func is ref:
        _add_run(ctx, tree, fn, parent, ref, False, use)
        return
    if _passed_to_checkpoint(ctx, tree, ref):
        use.checkpointed = True
        return
    if isinstance(parent, cst.Arg):
        holder = tree.parent.get(id(parent))
        if isinstance(holder, cst.Call) and is_builtin(ctx, holder.func, "len"):
            return  # len(self.blocks): harmless
        if isinstance(holder, cst.Call) and is_builtin(ctx, holder.func, "enumerate") and len(holder.args) == 1:
            loop = tree.parent.get(id(holder))
            if isinstance(loop, cst.For) and loop.iter is holder and isinstance(loop.target, cst.Tuple):
                elements = loop.target.elements
                if len(elements) == 2 and isinstance(elements[1].value, cst.Name):
                    _loop_runs(ctx, tree, fn, loop, elements[1].value.value, use)
                    return
        use.unclear = True
        return
    if isinstance(parent, cst.For) and parent.iter is ref and isinstance(parent.target, cst.Name):
        _loop_runs(ctx, tree, fn, parent, parent.target.value, use)
        return
    if isinstance(parent, cst.Subscript) and parent.value is ref and len(parent.slice) == 1:
        index = parent.slice[0].slice
        outer = tree.parent.get(id(parent))
        if _passed_to_checkpoint(ctx, tree, parent):
            use.checkpointed = True  # checkpoint(self.layers[i], x)
            return
        if (
            isinstance(index, cst.Index) and isinstance(index.value, cst.Name)
            and isinstance(outer, cst.Call) and outer.func is parent
        ):
            name = index.value.value
            loop = next((a for a in ancestors_in(tree, parent)
                         if isinstance(a, cst.For) and isinstance(a.target, cst.Name) and a.target.value == name), None)
            if loop is not None:
                if _chained(loop, outer):
                    _add_run(ctx, tree, fn, outer, parent, True, use)
                return
    use.unclear = True

def _loop_runs(ctx: FileContext, tree: FunctionTree, fn: cst.FunctionDef, loop: cst.For, var: str,
               use: StackUse) -> None:
    for node in tree.nodes:
        if not isinstance(node, cst.Name) or node.value != var:
            continue
        if not any(a is loop.body for a in ancestors_in(tree, node)):
            continue
        if _passed_to_checkpoint(ctx, tree, node):
            use.checkpointed = True  # checkpoint(blk, x)
            continue
        call = tree.parent.get(id(node))
        if isinstance(call, cst.Call) and call.func is node and _chained(loop, call):
            _add_run(ctx, tree, fn, call, node, True, use)

def _chained(loop: cst.For, call: cst.Call) -> bool:
    """The loop feeds each block's output to the next: a name passed to the block is reassigned in the loop.

    `for head in self.heads: outs.append(head(x))` runs blocks side by side, not as a deep chain.
    """
    return bool(NameUses.of(*call.args).reads & NameUses.of(loop.body).writes)

def _add_run(ctx: FileContext, tree: FunctionTree, fn: cst.FunctionDef, call: cst.Call, callee: cst.BaseExpression,
             per_block: bool, use: StackUse) -> None:
    if under_grad_off(ctx, tree, call):
        return  # runs without autograd: nothing is saved for backward
    parent = tree.parent.get(id(call))
    statement = None
    bare = False
    if isinstance(parent, cst.Arg) and not parent.star:
        bare = True  # a conditional expression is a valid argument as it is
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)) and parent.value is call:
        bare = True
        line = tree.parent.get(id(parent))
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            if not isinstance(parent, cst.Assign) or len(parent.targets) == 1:
                statement = line
    use.runs.append(Run(fn, call, callee, per_block, statement, bare))

def checkpointed_elsewhere(ctx: FileContext) -> bool:
    """The file applies checkpointing to whole models from outside (wrapper API, HF, timm)."""
    return _EXTERNAL_CHECKPOINTING.search(ctx.text) is not None

class _TorchCheckpointCalls(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.code: list[str] = []

    def visit_Call(self, node: cst.Call) -> bool:
        if self.ctx.qualname(node.func) in CHECKPOINT_FUNCTIONS:
            self.code.append(self.ctx.code(node))
            return False
        return True

def mentions_checkpointing(ctx: FileContext, cls: cst.ClassDef) -> bool:
    """The class deals with checkpointing in its own way: a `use_checkpoint` flag, a helper, HF's
    `gradient_checkpointing`, another library's checkpoint. Calls to torch's own checkpoint
    functions are left out: which stacks they cover is decided stack by stack (`StackUse.checkpointed`),
    so checkpointing one stack (by hand or by our fix) does not hide the others.
    """
    text = ctx.code(cls)
    calls = _TorchCheckpointCalls(ctx)
    walk(cls, calls)
    for code in calls.code:
        text = text.replace(code, "", 1)
    return _CHECKPOINT_WORDS.search(text) is not None

def inference_only_file(ctx: FileContext) -> bool:
    """The file evaluates models (no_grad, eval) and shows no training at all."""
    return _INFERENCE.search(ctx.text) is not None and _TRAINING.search(ctx.text) is None
