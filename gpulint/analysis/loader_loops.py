"""Loops over DataLoaders, on `ast`: which DataLoader call each `for` iterates, the names an iteration
binds to the batch, the host-to-device moves of them, and the loops around it.

A loop iterates a loader when its iterable, unwrapped from `enumerate()`/`tqdm()`-style wrappers,
holds a `torch.utils.data.DataLoader(...)` call: assigned to a name or `self.x`, or handed to a
parameter of a function of the file (analysis/holders.py). Anything not followed is "not known":
such a loop is simply not listed.

Batch names: the loop's target (less `enumerate`'s index), names unpacked or indexed from them in
the loop body (`x, y = batch`, `images = batch["image"]`), and the names a comprehension binds from
them (`{k: v.to(device) for k, v in batch.items()}`). A move is `.cuda(...)` or `.to(<device>)` on
one of them (or on an item or attribute of one: `batch["x"].to(device)`), never `.cpu()` nor
`.to("cpu")`, nor `.to()` a dtype or a tensor.
"""

from __future__ import annotations

import ast
from dataclasses import field
from typing import Optional, Union

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.holders import held_values
from gpulint.core.torch_api import DATALOADER
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.project.loader_flow import DEVICE_WORDS, ITERATION_WRAPPERS
from gpulint.records import dataclass

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
Loop = Union[ast.For, ast.AsyncFor, ast.While]

# calls that hand the items of an iterable on unchanged: `for i, b in enumerate(tqdm(loader))`
WRAPPERS = ITERATION_WRAPPERS
HOST_READS = frozenset({"item", "tolist", "numpy", "cpu"})
HOST_FUNCTIONS = frozenset({"print", "float", "int", "bool", "str", "repr"})
_ACCELERATORS = ("cuda", "xpu", "mps")


# ------------------------------------------------------------------------------------------------
# moves to a device
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Move:
    """A `.cuda()` / `.to(device)` call: where it moves to, as code, and what else it passes."""

    call: ast.Call
    target: str  # the device as code (`"cuda"` for a bare `.cuda()`)
    accelerator: bool  # the target is known to be an accelerator (else: decided by device evidence)
    simple: bool  # nothing but the device (and non_blocking) is passed
    non_blocking: bool  # already passes non_blocking (any value but a literal False)


def device_kind(ctx: AstContext, expr: ast.expr) -> Optional[bool]:
    """For an expression naming a device: whether it is known to be an accelerator (True) or only
    named like a device (False). None when it is no device: a dtype, a tensor, the CPU."""
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, str):
            return True if expr.value.split(":")[0] in _ACCELERATORS else None
        if isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return True  # `.to(0)`: an accelerator's index
        return None
    if isinstance(expr, ast.Call):
        if ctx.names.qualname(expr.func) != "torch.device" or not expr.args:
            return None
        return device_kind(ctx, expr.args[0])
    if (ctx.names.qualname(expr) or "").startswith("torch."):
        return None  # torch.float16, torch.bfloat16
    last = expr.attr if isinstance(expr, ast.Attribute) else (expr.id if isinstance(expr, ast.Name) else "")
    lowered = last.lower()
    if "dtype" in lowered or lowered == "cpu" or not any(word in lowered for word in DEVICE_WORDS):
        return None
    return False


def move_of(ctx: AstContext, call: ast.AST) -> Optional[Move]:
    """`call` as a host-to-device move, or None (`.cpu()`, `.to(dtype)`, `.to(tensor)`, `*args`)."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) \
            or call.func.attr not in ("cuda", "to"):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    blocking = keywords.get("non_blocking")
    non_blocking = blocking is not None and not (isinstance(blocking, ast.Constant) and blocking.value is False)
    extra = [k for k in keywords if k != "non_blocking"]
    if call.func.attr == "cuda":
        return Move(call, '"cuda"', True, not call.args and not extra, non_blocking)
    if call.args:
        target: Optional[ast.expr] = call.args[0]
        others = len(call.args) - 1 + len(extra)
    else:
        target = keywords.get("device")
        others = len([k for k in extra if k != "device"])
    if target is None:
        return None
    kind = device_kind(ctx, target)
    if kind is None:
        return None
    text = ctx.segment(target)
    return Move(call, text, kind, others == 0 and "\n" not in text and "\r" not in text, non_blocking)


# ------------------------------------------------------------------------------------------------
# loops over loaders
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoaderLoop:
    loop: Union[ast.For, ast.AsyncFor]
    loaders: tuple[ast.Call, ...]  # the DataLoader calls the iterable may hold
    complete: bool  # every value the iterable may hold is one of `loaders`
    batch: frozenset[str]  # names bound to a batch or a part of it in the loop body
    whole: frozenset[str]  # names bound to a whole batch (`batch` in `for batch in loader`)
    moves: tuple[Move, ...]  # moves of batch names to a device in the loop body (not in nested functions)
    outer: tuple[Loop, ...]  # the loops of the same function around this loop, innermost first
    function: Optional[FunctionNode]


@dataclass
class LoaderLoops:
    loops: list[LoaderLoop] = field(default_factory=list)

    def over(self, loader: ast.Call) -> list[LoaderLoop]:
        """The loops that may iterate `loader`."""
        return [loop for loop in self.loops if any(c is loader for c in loop.loaders)]


def unwrapped(expr: ast.expr) -> ast.expr:
    """`enumerate(tqdm(loader))` -> `loader`."""
    while isinstance(expr, ast.Call) and expr.args and not isinstance(expr.args[0], ast.Starred):
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        if name not in WRAPPERS:
            break
        expr = expr.args[0]
    return expr


def bound_names(target: ast.AST) -> set[str]:
    """The names a target binds: `x, y`, `(i, (x, y))`, `batch`."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in bound_names(element)}
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    return set()


def base_name(expr: ast.AST) -> Optional[str]:
    """`x` for `x`, `x[0]`, `x["image"]`, `x.images`, `x.items()`: the name a chain starts from."""
    while isinstance(expr, (ast.Subscript, ast.Attribute, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _whole(loop: Union[ast.For, ast.AsyncFor]) -> set[str]:
    target: ast.AST = loop.target
    source = loop.iter
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
            and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
        target = target.elts[1]
    return {target.id} if isinstance(target, ast.Name) else set()


def _batch_target(loop: Union[ast.For, ast.AsyncFor]) -> set[str]:
    """The loop target's names, less `enumerate`'s index."""
    target: ast.AST = loop.target
    if isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "enumerate" \
            and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
        target = target.elts[1]
    return bound_names(target)


def _own_nodes(root: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of these statements, not those of functions, lambdas or classes defined in them."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(root))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(child_nodes(node))))
    return out


def _batch_names(loop: Union[ast.For, ast.AsyncFor], nodes: list[ast.AST]) -> set[str]:
    names = _batch_target(loop)
    for _ in range(3):  # `x, y = batch` then `img = x[0]`: a few rounds reach a fixed point
        before = len(names)
        for node in nodes:
            if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Call) \
                    and base_name(node.value) in names:
                for target in node.targets:
                    names |= bound_names(target)
            elif isinstance(node, ast.comprehension) and base_name(node.iter) in names:
                names |= bound_names(node.target)  # `for k, v in batch.items()`
        if len(names) == before:
            break
    return names


def assigned_from(ctx: AstContext, call: ast.Call) -> set[str]:
    """The names `call`'s result is assigned to: `x = call`, or its place in `x, y = a.to(d), b.to(d)`."""
    parent = ctx.parent(call)
    assigned: set[str] = set()
    if isinstance(parent, ast.Assign):
        for target in parent.targets:
            assigned |= bound_names(target)
    elif isinstance(parent, ast.Tuple):
        assign = ctx.parent(parent)
        if isinstance(assign, ast.Assign) and len(assign.targets) == 1 \
                and isinstance(assign.targets[0], (ast.Tuple, ast.List)):
            index = next(i for i, e in enumerate(parent.elts) if e is call)
            destination = assign.targets[0].elts
            if index < len(destination):
                assigned = bound_names(destination[index])
    return assigned


def read_on_host(ctx: AstContext, nodes: list[ast.AST], call: ast.Call) -> bool:
    """The move's result is read on the host in the loop: `.to(device).item()`, or a name it is assigned
    to passed to `.item()`, `.tolist()`, `.numpy()`, `.cpu()`, `print()`, `float()` later in the body."""
    parent = ctx.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr in HOST_READS:
        return True
    assigned = assigned_from(ctx, call)
    if not assigned:
        return False
    start = (call.lineno, call.col_offset)
    for other in nodes:
        if not isinstance(other, ast.Call) or (other.lineno, other.col_offset) <= start:
            continue
        func = other.func
        if isinstance(func, ast.Attribute) and func.attr in HOST_READS and base_name(func.value) in assigned:
            return True
        if isinstance(func, ast.Name) and func.id in HOST_FUNCTIONS and any(
                base_name(a) in assigned for a in other.args):
            return True
    return False


def _outer_loops(ctx: AstContext, loop: ast.AST) -> tuple[tuple[Loop, ...], Optional[FunctionNode]]:
    outer: list[Loop] = []
    for ancestor in ctx.ancestors(loop):
        if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
            outer.append(ancestor)
        elif isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return tuple(outer), ancestor
        elif isinstance(ancestor, (ast.Lambda, ast.ClassDef)):
            break
    return tuple(outer), None


def _loader_values(ctx: AstContext, expr: ast.expr) -> tuple[tuple[ast.Call, ...], bool]:
    values = held_values(ctx, expr)
    if not values:
        return (), False
    loaders = tuple(v for v in values if isinstance(v, ast.Call) and ctx.names.qualname(v.func) in DATALOADER)
    return loaders, len(loaders) == len(values)


def loader_loops(ctx: AstContext) -> LoaderLoops:
    """Every `for` loop of the file over a DataLoader call the file shows (shared: `ctx.analysis`)."""
    found = LoaderLoops()
    for loop in ctx.nodes(ast.For, ast.AsyncFor):
        assert isinstance(loop, (ast.For, ast.AsyncFor))
        loaders, complete = _loader_values(ctx, unwrapped(loop.iter))
        if not loaders:
            continue
        nodes = _own_nodes(loop.body)
        names = _batch_names(loop, nodes)
        moves = []
        for node in nodes:
            move = move_of(ctx, node)
            if move is not None and isinstance(move.call.func, ast.Attribute) \
                    and base_name(move.call.func.value) in names:
                moves.append(move)
        outer, function = _outer_loops(ctx, loop)
        found.loops.append(LoaderLoop(loop, loaders, complete, frozenset(names), frozenset(_whole(loop)),
                                      tuple(moves), outer, function))
    return found


def runs_once(loop: Union[ast.For, ast.AsyncFor]) -> bool:
    """The body leaves the loop on its first pass: a `break`, `return` or `raise` among its own top-level
    statements and no `continue` of this loop that could skip it (a data-dependent initialisation that
    takes one batch: `for x, y in loader: init(model, x.cuda()); break`). Its copies are not repeated."""
    if not any(isinstance(s, (ast.Break, ast.Return, ast.Raise)) for s in loop.body):
        return False
    stack: list[ast.AST] = list(loop.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Continue):
            return False
        for child in child_nodes(node):
            if not isinstance(child, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                      ast.ClassDef, ast.Lambda)):
                stack.append(child)
    return True
