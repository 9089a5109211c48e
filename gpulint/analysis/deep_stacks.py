"""Deep stacks of blocks and how forward runs them: the facts GPU301 (activation checkpointing) needs.

Activation checkpointing pays off on deep stacks of blocks with parameters. This module
answers, statically and conservatively, on CPython's `ast`: does a module class's `__init__` build an
`nn.Sequential` / `nn.ModuleList` of many compute blocks (and how many, when the file shows
it); where do `forward` and the methods it calls run that stack; and is the class already
checkpointed or used only for inference. Anything unclear means "no".
"""

from __future__ import annotations

import ast
import re
from dataclasses import field
from typing import Optional

from gpulint.analysis.amp_regions import name_uses
from gpulint.analysis.ast_context import AstContext, FunctionNode
from gpulint.analysis.ast_values import single_value
from gpulint.analysis.nn_modules import (
    MAX_EVAL_DEPTH,
    ancestors_in,
    call_args,
    forward_methods,
    function_nodes,
    grad_off_decorated,
    in_function,
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
from gpulint.core.torch_api import CHECKPOINT_FUNCTIONS, MODULE_LIST, SEQUENTIAL
from gpulint.project.ast_nodes import fast_walk
from gpulint.records import dataclass

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

_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})

HEAVY, BLOCK, LIGHT = "heavy", "block", "light"


def block_kind(ctx: AstContext, expr: ast.expr, seen: frozenset[str] = frozenset()) -> str:
    """HEAVY: a recognised compute layer or a block of this file with parameters; BLOCK: a class
    imported from outside torch (a block when repeated, unknown otherwise); LIGHT: anything else."""
    if isinstance(expr, ast.Name):
        value = single_value(expr, ctx.names)
        return block_kind(ctx, value, seen) if isinstance(value, ast.Call) else LIGHT
    if not isinstance(expr, ast.Call):
        return LIGHT
    qualified = ctx.qualname(expr.func)
    if qualified == "copy.deepcopy" and (expr.args or expr.keywords):
        return block_kind(ctx, call_args(expr)[0].value, seen)
    if qualified is not None and qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional"):
        layer = qualified.rsplit(".", 1)[-1]
        if layer == SEQUENTIAL:
            kinds = [block_kind(ctx, arg.value, seen) for arg in call_args(expr) if not arg.star]
            return HEAVY if HEAVY in kinds else LIGHT
        return HEAVY if layer in HEAVY_LAYERS else LIGHT
    if isinstance(expr.func, ast.Name) and qualified is None:
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


def _parameter_memo(ctx: AstContext) -> dict[str, bool]:
    """Per file: whether each local module class holds parameters (asked once per class)."""
    return {}


def _has_parameters(ctx: AstContext, cls: ast.ClassDef, seen: frozenset[str]) -> bool:
    """The class's __init__ builds a compute layer, a parameter-holding block, or an nn.Parameter."""
    init = methods(cls).get("__init__")
    if init is None:
        return False
    for node in function_nodes(ctx, init):
        if isinstance(node, ast.Call):
            if ctx.qualname(node.func) in _PARAMETERS:
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
    cls: ast.ClassDef
    attr: str
    kind: str  # SEQUENTIAL or MODULE_LIST
    construction: ast.Call
    statement: ast.stmt
    depth: Depth


def stacks_in(ctx: AstContext, cls: ast.ClassDef) -> list[Stack]:
    """Sequential / ModuleList stacks assigned to `self.<attr>` once in `__init__`, with their depth."""
    init = methods(cls).get("__init__")
    me = self_name(init) if init is not None else None
    if init is None or me is None:
        return []
    assigned: dict[str, int] = {}
    found: list[tuple[str, str, ast.Call, ast.stmt]] = []
    for node in function_nodes(ctx, init):
        targets: list[ast.expr] = []
        value: Optional[ast.expr] = None
        if isinstance(node, ast.Assign):
            targets, value = list(node.targets), node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [node.target], node.value
        for target in targets:
            attr = self_attribute(target, me)
            if attr is None:
                continue
            assigned[attr] = assigned.get(attr, 0) + 1
            if isinstance(node, ast.Assign) and len(targets) == 1 and isinstance(value, ast.Call):
                layer = _container(ctx, value)
                if layer is not None and not _in_suite(ctx, node):  # a line of its own, not `if x: y = ...`
                    found.append((attr, layer, value, node))
    out = []
    for attr, layer, call, statement in found:
        if assigned[attr] != 1:
            continue  # built in several places: which one runs is not clear
        depth = Depth()
        if not _container_depth(ctx, init, call, layer, depth):
            continue
        if layer == MODULE_LIST and not _appends(ctx, init, me, attr, depth):
            continue
        out.append(Stack(cls, attr, layer, call, statement, depth))
    return out


def _statement_block(ctx: AstContext, statement: ast.stmt) -> list[ast.stmt]:
    """The statement list (a body, an `else`, a handler's body) that holds `statement`."""
    owner = ctx.parent(statement)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(owner, name, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return [statement]


def _in_suite(ctx: AstContext, statement: ast.stmt) -> bool:
    """The statement follows its block's header on the header's line (`if x: y = 1`: LibCST's
    SimpleStatementSuite, not a line of its own)."""
    first = _statement_block(ctx, statement)[0]
    if isinstance(ctx.parent(first), ast.Module):
        return False
    return ctx.line(first.lineno)[:ctx.column(first.lineno, first.col_offset)].strip() != ""


def _container(ctx: AstContext, call: ast.Call) -> Optional[str]:
    qualified = ctx.qualname(call.func) or ""
    if qualified.startswith("torch.nn."):
        last = qualified.rsplit(".", 1)[-1]
        if last in (SEQUENTIAL, MODULE_LIST):
            return last
    return None


def _container_depth(ctx: AstContext, fn: FunctionNode, call: ast.Call, layer: str, depth: Depth) -> bool:
    """Add the blocks passed to the constructor; False when the arguments are not understood."""
    args = call_args(call)
    if any(arg.keyword is not None for arg in args):
        return False
    if layer == MODULE_LIST:
        if len(args) > 1:
            return False
        return not args or _expand(ctx, fn, args[0].value, depth)
    for arg in args:
        if arg.star == "*":
            if not _expand(ctx, fn, arg.value, depth):
                return False
        elif arg.star:
            return False
        else:
            depth.add(block_kind(ctx, arg.value), 1, repeated=False)
    return True


def _expand(ctx: AstContext, fn: FunctionNode, expr: ast.expr, depth: Depth, level: int = 0) -> bool:
    """Add the blocks of a list expression: a literal, a comprehension, or a list built in __init__."""
    if level > MAX_EVAL_DEPTH:
        return False
    if isinstance(expr, (ast.List, ast.Tuple)):
        for element in expr.elts:
            if isinstance(element, ast.Starred):
                if not _expand(ctx, fn, element.value, depth, level + 1):
                    return False
            else:
                depth.add(block_kind(ctx, element), 1, repeated=False)
        return True
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        if len(expr.generators) != 1:
            return False
        comp = expr.generators[0]
        if comp.ifs or comp.is_async:
            return False
        if not is_range_call(ctx, comp.iter):
            return False
        depth.add(block_kind(ctx, expr.elt), range_length(ctx, comp.iter, fn), repeated=True)
        return True
    if isinstance(expr, ast.Call) and is_builtin(ctx, expr.func, "list") and len(call_args(expr)) == 1:
        return _expand(ctx, fn, call_args(expr)[0].value, depth, level + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _expand(ctx, fn, expr.left, depth, level + 1) and _expand(ctx, fn, expr.right, depth, level + 1)
    if isinstance(expr, ast.Name):
        owner = ctx.names.binding_scope(expr)
        value = single_value(expr, ctx.names)
        if owner is None or value is None or owner is not ctx.names.scopes.get(id(fn)):
            return False
        if not _expand(ctx, fn, value, depth, level + 1):
            return False
        return _list_mutations(ctx, fn, ctx.names.mutations_of(owner, expr.id), depth)
    return False


def _list_mutations(ctx: AstContext, fn: FunctionNode, nodes: list[ast.AST], depth: Depth) -> bool:
    """`layers.append(Block())` (in loops over ranges) adds blocks; any other change is not understood."""
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return False
        if not in_function(ctx, fn, node):
            return False  # changed in a nested function
        method = node.func.attr
        if method in {"__len__", "copy"}:
            continue
        args = call_args(node)
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            return False
        times = _repetitions(ctx, fn, node)
        if method == "append":
            depth.add(block_kind(ctx, args[0].value), times, repeated=True)
        elif method == "extend":
            inner = Depth()
            if not _expand(ctx, fn, args[0].value, inner):
                return False
            depth.known += inner.known * (times or 0)
            depth.unknown = depth.unknown or inner.unknown or (times is None and (inner.known > 0))
        else:
            return False
    return True


def _appends(ctx: AstContext, fn: FunctionNode, me: str, attr: str, depth: Depth) -> bool:
    """Blocks appended to `self.<attr>` in __init__ (ModuleList built by a loop)."""
    calls: list[ast.AST] = []
    for node in function_nodes(ctx, fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if self_attribute(node.func.value, me) == attr:
            calls.append(node)
    return _list_mutations(ctx, fn, calls, depth)


def _repetitions(ctx: AstContext, fn: FunctionNode, node: ast.AST) -> Optional[int]:
    """How many times a statement runs in __init__: product of the enclosing `for _ in range(n)` loops."""
    times: Optional[int] = 1
    for ancestor in ancestors_in(ctx, fn, node):
        if ancestor is fn:
            break
        if isinstance(ancestor, (ast.For, ast.AsyncFor)):
            if not is_range_call(ctx, ancestor.iter):
                return None
            n = range_length(ctx, ancestor.iter, fn)
            times = None if n is None or times is None else times * n
        elif isinstance(ancestor, (ast.If, ast.While, ast.Try, ast.IfExp)):
            return None
    return times


@dataclass
class Run:
    """One place where forward (or a method it calls) runs a stack."""

    method: FunctionNode
    call: ast.Call  # `self.X(x)`, `blk(x)` or `self.X[i](x)`; its `func` is the stack or block run
    per_block: bool  # the call runs one block (loop), not the whole stack
    bare_value: bool  # the call is a whole assigned/returned value or argument: no parentheses needed


@dataclass
class StackUse:
    runs: list[Run] = field(default_factory=list)
    unclear: bool = False  # used in a way we don't understand: report, but offer no fix
    checkpointed: bool = False  # the stack or its blocks are passed to torch's checkpoint somewhere


def stack_use(ctx: AstContext, cls: ast.ClassDef, attr: str) -> StackUse:
    use = StackUse()
    for fn in forward_methods(ctx, cls):
        me = self_name(fn)
        if grad_off_decorated(ctx, fn):
            continue
        for node in function_nodes(ctx, fn):
            if isinstance(node, ast.Attribute) and self_attribute(node, me) == attr:
                _classify(ctx, fn, node, use)
    return use


def _argument_of(ctx: AstContext, expr: ast.AST) -> tuple[bool, Optional[ast.AST]]:
    """Whether `expr` is passed as an argument (`f(expr)`, `f(*expr)`, `f(k=expr)`), and to what."""
    parent = ctx.parent(expr)
    if isinstance(parent, ast.Call) and any(a is expr for a in parent.args):
        return True, parent
    if isinstance(parent, ast.keyword):
        return True, ctx.parent(parent)
    if isinstance(parent, ast.Starred):
        holder = ctx.parent(parent)
        if isinstance(holder, ast.Call) and any(a is parent for a in holder.args):
            return True, holder
    return False, None


def _passed_to_checkpoint(ctx: AstContext, expr: ast.AST) -> bool:
    _, holder = _argument_of(ctx, expr)
    return isinstance(holder, ast.Call) and ctx.qualname(holder.func) in CHECKPOINT_FUNCTIONS


def _one_index(ctx: AstContext, subscript: ast.Subscript) -> bool:
    """`x[i]`, not `x[i, j]` (a parenthesised tuple `x[(i, j)]` is one index)."""
    index = subscript.slice
    return not (isinstance(index, ast.Tuple) and not ctx.segment(index).startswith("("))


def _classify(ctx: AstContext, fn: FunctionNode, ref: ast.Attribute, use: StackUse) -> None:
    parent = ctx.parent(ref)
    if isinstance(parent, ast.Call) and parent.func is ref:
        _add_run(ctx, fn, parent, False, use)
        return
    if _passed_to_checkpoint(ctx, ref):
        use.checkpointed = True
        return
    is_argument, holder = _argument_of(ctx, ref)
    if is_argument:
        if isinstance(holder, ast.Call) and is_builtin(ctx, holder.func, "len"):
            return  # len(self.blocks): harmless
        if isinstance(holder, ast.Call) and is_builtin(ctx, holder.func, "enumerate") and len(call_args(holder)) == 1:
            loop = ctx.parent(holder)
            if isinstance(loop, (ast.For, ast.AsyncFor)) and loop.iter is holder and isinstance(loop.target, ast.Tuple):
                elements = loop.target.elts
                second = elements[1].value if len(elements) == 2 and isinstance(elements[1], ast.Starred) \
                    else elements[1] if len(elements) == 2 else None
                if isinstance(second, ast.Name):
                    _loop_runs(ctx, fn, loop, second.id, use)
                    return
        use.unclear = True
        return
    if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is ref and isinstance(parent.target, ast.Name):
        _loop_runs(ctx, fn, parent, parent.target.id, use)
        return
    if isinstance(parent, ast.Subscript) and parent.value is ref and _one_index(ctx, parent):
        index = parent.slice
        outer = ctx.parent(parent)
        if _passed_to_checkpoint(ctx, parent):
            use.checkpointed = True  # checkpoint(self.layers[i], x)
            return
        if isinstance(index, ast.Name) and isinstance(outer, ast.Call) and outer.func is parent:
            loop = next((a for a in ancestors_in(ctx, fn, parent) if isinstance(a, (ast.For, ast.AsyncFor))
                         and isinstance(a.target, ast.Name) and a.target.id == index.id), None)
            if loop is not None:
                if _chained(loop, outer):
                    _add_run(ctx, fn, outer, True, use)
                return
    use.unclear = True


def _in_body(ctx: AstContext, fn: FunctionNode, loop: ast.AST, node: ast.AST) -> bool:
    body = getattr(loop, "body", [])
    return any(any(a is s for s in body) for a in ancestors_in(ctx, fn, node))


def _loop_runs(ctx: AstContext, fn: FunctionNode, loop: ast.For | ast.AsyncFor, var: str, use: StackUse) -> None:
    for node in function_nodes(ctx, fn):
        if isinstance(node, ast.keyword) and node.arg == var:
            # LibCST read a keyword's name as a Name: `checkpoint(f, blk=...)` counted as checkpointing
            if _in_body(ctx, fn, loop, node) and _passed_to_checkpoint(ctx, node.value):
                use.checkpointed = True
            continue
        if not isinstance(node, ast.Name) or node.id != var:
            continue
        if not _in_body(ctx, fn, loop, node):
            continue
        if _passed_to_checkpoint(ctx, node):
            use.checkpointed = True  # checkpoint(blk, x)
            continue
        call = ctx.parent(node)
        if isinstance(call, ast.Call) and call.func is node and _chained(loop, call):
            _add_run(ctx, fn, call, True, use)


def _chained(loop: ast.For | ast.AsyncFor, call: ast.Call) -> bool:
    """The loop feeds each block's output to the next: a name passed to the block is reassigned in the loop.

    `for head in self.heads: outs.append(head(x))` runs blocks side by side, not as a deep chain.
    """
    reads = name_uses(*call.args, *(k.value for k in call.keywords))[0]
    return bool(reads & name_uses(*loop.body)[1])


def _add_run(ctx: AstContext, fn: FunctionNode, call: ast.Call, per_block: bool, use: StackUse) -> None:
    if under_grad_off(ctx, fn, call):
        return  # runs without autograd: nothing is saved for backward
    is_argument, _ = _argument_of(ctx, call)
    parent = ctx.parent(call)
    # a conditional expression is a valid argument as it is (not after `*` or `**`)
    bare = is_argument and not isinstance(parent, ast.Starred) \
        and not (isinstance(parent, ast.keyword) and parent.arg is None)
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.Return)) and parent.value is call:
        bare = True
    use.runs.append(Run(fn, call, per_block, bare))


def checkpointed_elsewhere(ctx: AstContext) -> bool:
    """The file applies checkpointing to whole models from outside (wrapper API, HF, timm)."""
    return _EXTERNAL_CHECKPOINTING.search(ctx.text) is not None


def mentions_checkpointing(ctx: AstContext, cls: ast.ClassDef) -> bool:
    """The class deals with checkpointing in its own way: a `use_checkpoint` flag, a helper, HF's
    `gradient_checkpointing`, another library's checkpoint. Calls to torch's own checkpoint
    functions are left out: which stacks they cover is decided stack by stack (`StackUse.checkpointed`),
    so checkpointing one stack (by hand or by our fix) does not hide the others.

    The class's text is what LibCST gave as its code before the port: the comment lines above it (not
    those a block before it keeps) and the indented ones after it; a call spread over lines indented
    like its statement is not found in it (LibCST printed it without that indentation), so it stays.
    """
    text = _class_text(ctx, cls)
    inside: list[tuple[int, int]] = []
    calls = [n for n in fast_walk(cls) if isinstance(n, ast.Call) and ctx.qualname(n.func) in CHECKPOINT_FUNCTIONS]
    for node in sorted(calls, key=lambda n: ctx.order(n) or 0):
        where = (ctx.order(node) or 0, _last_order(ctx, node))
        if any(start <= where[0] <= end for start, end in inside):
            continue  # inside a checkpoint call already taken out
        inside.append(where)
        code = _call_code(ctx, node)
        if code is not None:
            text = text.replace(code, "", 1)
    return _CHECKPOINT_WORDS.search(text) is not None


def _last_order(ctx: AstContext, node: ast.AST) -> int:
    return max(ctx.order(n) or 0 for n in fast_walk(node))


def _call_code(ctx: AstContext, call: ast.Call) -> Optional[str]:
    """The call's code with the parentheses around it, as LibCST printed the call alone; None where
    that print differs from the file (a continuation line indented like the call's statement)."""
    start = ctx.offset(call.lineno, call.col_offset)
    end = ctx.offset(call.end_lineno or call.lineno, call.end_col_offset or 0)
    text = ctx.text
    parent = ctx.parent(call)
    owned = 1 if isinstance(parent, ast.Call) and parent.args == [call] and not parent.keywords else 0
    pairs = 0
    before, after = start, end
    while True:
        b = len(text[:before].rstrip())
        a = len(text) - len(text[after:].lstrip())
        if b > 0 and a < len(text) and text[b - 1] == "(" and text[a] == ")":
            pairs += 1
            before, after = b - 1, a + 1
        else:
            break
    for _ in range(max(0, pairs - owned)):
        start = len(text[:start].rstrip()) - 1
        end = len(text) - len(text[end:].lstrip()) + 1
    code = text[start:end]
    if "\n" not in code and "\r" not in code:
        return code
    row = ctx.statement(call).lineno
    line = ctx.line(row)
    indent = line[:len(line) - len(line.lstrip())]
    if not indent:
        return code
    strings = [n for n in fast_walk(call) if isinstance(n, (ast.Constant, ast.JoinedStr))
               and (n.end_lineno or n.lineno) > n.lineno]
    first_row = ctx.row(start)
    last_row = ctx.row(end)
    for r in range(first_row + 1, last_row + 1):
        if any(s.lineno < r <= (s.end_lineno or s.lineno) for s in strings):
            continue
        if ctx.line(r).startswith(indent):
            return None
    return code


def _class_text(ctx: AstContext, cls: ast.ClassDef) -> str:
    """The class's rows with the comment lines LibCST gave it: above it, those after the statement (or
    block) before it; below it, those up to the last line indented like its body."""
    first = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
    block = _statement_block(ctx, cls)
    index = next(i for i, s in enumerate(block) if s is cls)
    start = first
    if not (index == 0 and isinstance(ctx.parent(cls), ast.Module)):  # a module's first lines are its header
        row = first - 1
        while row >= 1 and _trivia(ctx.line(row)):
            row -= 1
        start = row + 1
        if index > 0:
            indent = _block_indent(ctx, _last_block(ctx, block[index - 1]))
            if indent:
                owned = [r for r in range(start, first) if ctx.line(r).startswith(indent)]
                if owned:
                    start = owned[-1] + 1
    end = cls.end_lineno or cls.lineno
    indent = _block_indent(ctx, cls.body)
    if indent:
        row = end + 1
        last_row = ctx.row(len(ctx.text))
        while row <= last_row and _trivia(ctx.line(row)):
            if ctx.line(row).startswith(indent):
                end = row
            row += 1
    last = ctx.row(len(ctx.text))
    stop = ctx.offset(end + 1, 0) if end < last else len(ctx.text)
    return ctx.text[ctx.offset(start, 0):stop]


def _trivia(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _last_block(ctx: AstContext, statement: ast.stmt) -> Optional[list[ast.stmt]]:
    """The statement list that ends a compound statement (whose trailing comments it keeps)."""
    if isinstance(statement, ast.If) and statement.orelse:
        nested = statement.orelse[0]
        if len(statement.orelse) == 1 and isinstance(nested, ast.If) and \
                ctx.line(nested.lineno)[ctx.column(nested.lineno, nested.col_offset):].startswith("elif"):
            return _last_block(ctx, nested)
        return statement.orelse
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        return statement.orelse or statement.body
    if isinstance(statement, ast.Try) or (hasattr(ast, "TryStar") and isinstance(statement, ast.TryStar)):
        return statement.finalbody or statement.orelse or statement.handlers[-1].body
    if hasattr(ast, "Match") and isinstance(statement, ast.Match):
        return statement.cases[-1].body
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.AsyncWith)):
        return statement.body
    return None


def _block_indent(ctx: AstContext, block: Optional[list[ast.stmt]]) -> str:
    """The indentation of an indented block ("" for none, or a suite on its header's line)."""
    if not block:
        return ""
    first = block[0]
    line = ctx.line(first.lineno)
    before = line[:ctx.column(first.lineno, first.col_offset)]
    return before if before and not before.strip() else ""


def inference_only_file(ctx: AstContext) -> bool:
    """The file evaluates models (no_grad, eval) and shows no training at all."""
    return _INFERENCE.search(ctx.text) is not None and _TRAINING.search(ctx.text) is None
