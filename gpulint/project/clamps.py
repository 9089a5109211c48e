"""A loss that clamps probabilities to `1 - eps` and takes `log(1 - p)`: what 16-bit autocast breaks.

Focal and hand-written binary cross-entropy losses guard their logs with
`p = torch.clamp(p, eps, 1 - eps)` and then compute `torch.log(1 - p)`. Under autocast `p` (a sigmoid of
a convolution's or a linear layer's output) is float16 or bfloat16, and the upper bound is rounded to
that type: no bfloat16 lies between 1 - 2**-8 and 1, no float16 between 1 - 2**-11 and 1, so 1 - eps
rounds to 1.0 itself when eps <= 2**-9 (bfloat16) or eps <= 2**-12 (float16), ties going to the even
1.0. A confident prediction then stays 1.0, `1 - p` is 0, and the log is -inf: the loss is inf, or NaN
where a zero weight multiplies it (measured with torch 2.13 on the CPU: `clamp(p, 1e-4, 1 - 1e-4)` gives
1.0 in both types, and a focal loss over a convolution whose sigmoid saturates returns NaN under bfloat16
autocast, a finite loss in fp32 and with eps = 1e-2).

Read from CPython's `ast` (project/facts.py's layer): the loss usually lives in another module than the
training step (a model's `forward` calls the project's `losses.FocalLoss`), so the file's fact is one bool
(`FileFacts.log_clamp_rounds_to_one`) that the project view joins over the modules a training file imports.
Only a clamp whose result the same function takes `log(1 - x)` or `log1p(-x)` of counts, with an eps
the file spells as a literal or a name bound once to one (in the function or at module level); a clamp
of a value cast to float32 first (`p.float().clamp(...)`) is safe and does not count.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Iterator, Optional, Union

from gpulint.project.ast_nodes import all_nodes, class_defs, walk
from gpulint.project.loader_flow import own_nodes

# the largest eps for which 1 - eps rounds to 1.0 in bfloat16, which keeps 8 significant bits (spacing 2**-8 just
# below 1; half of it is a tie, which rounds to the even 1.0). float16 keeps 11 (2**-11; 1.0 from eps <= 2**-12),
# so a bound that float16 holds may still be 1.0 in bfloat16, which amp-dtype "auto" picks on Ampere and newer
BFLOAT16_ROUNDS_TO_ONE = 2.0 ** -9
# float16's largest finite value: a mask filled with -1e9 under float16 autocast raises ("value cannot be converted
# to type at::Half without overflow")
FLOAT16_MAX = 65504.0
# names a file must use for a clamp guarding a log to be looked for (FileFacts' gate, cheap)
CLAMP_NAMES = frozenset({"clamp", "clamp_", "clip", "clip_"})
LOG_NAMES = frozenset({"log", "log1p"})

_TORCH_SIGMOIDS = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})
SIGMOID_NAMES = frozenset({"sigmoid"})  # FileFacts' gate for log_one_minus_sigmoid
_TORCH_CLAMPS = frozenset({"torch.clamp", "torch.clip", "torch.clamp_", "torch.clip_"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = (*_FUNCTIONS, ast.ClassDef)  # module-level statements that are scopes of their own
_FLOAT32 = frozenset({"float", "double"})  # `p.float()`: the clamp then works in fp32
_FLOAT32_DTYPES = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})

Qualified = Callable[[ast.AST], set[str]]  # a dotted name -> what it may stand for, through the imports
Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef]


def log_clamp_rounds_to_one(tree: ast.Module, qualified: Qualified) -> bool:
    """A function of the file (or its module-level code) clamps a value to `1 - eps` with eps <=
    BFLOAT16_ROUNDS_TO_ONE and takes `log(1 - x)` / `log1p(-x)` of the clamped name (or of the clamp)."""
    every = all_nodes(tree)
    if not any(isinstance(n, ast.Call) and _one_minus_bound(n) for n in every):
        return False  # the common case: no clamp to `1 - something` at all, one pass over the cached nodes
    scopes: list[Scope] = [tree, *(n for n in every if isinstance(n, _FUNCTIONS))]
    module: dict[str, Optional[float]] = {}
    for scope in scopes:  # the module first: its names are the functions' outer names
        if isinstance(scope, ast.Module):
            nodes = list(own_nodes([s for s in scope.body if not isinstance(s, _DEFINITIONS)]))
            numbers = module = _numbers(nodes)
        else:
            nodes = list(own_nodes(scope.body))
            if not any(isinstance(n, ast.Call) and _one_minus_bound(n) for n in nodes):
                continue
            numbers = _numbers(nodes, _parameters(scope), module)
        clamped = _Clamps(qualified, numbers)
        tiny: set[str] = set()  # names bound to a clamp whose bound rounds to 1.0
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if clamped.rounds_to_one(node.value):
                    tiny.add(node.targets[0].id)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                target = clamped.in_place(node.value)  # `p.clamp_(eps, 1 - eps)`
                if target is not None:
                    tiny.add(target)
        if any(_log_one_minus(node, qualified, tiny, clamped) for node in nodes if isinstance(node, ast.Call)):
            return True
    return False


def _one_minus_bound(call: ast.Call) -> bool:
    """A call named like a clamp with an argument spelled `1 - x` or a literal just below 1: worth resolving."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in CLAMP_NAMES:
        return False
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Sub) and _number(argument.left, {}) == 1:
            return True
        bound = _number(argument, {})
        if bound is not None and 1.0 - BFLOAT16_ROUNDS_TO_ONE <= bound < 1.0:
            return True
    return False


class _Clamps:
    """Clamp calls whose upper bound is `1 - eps` with an eps that rounds it to 1.0 in bfloat16."""

    def __init__(self, qualified: Qualified, numbers: dict[str, Optional[float]]) -> None:
        self.qualified = qualified
        self.numbers = numbers

    def parts(self, call: ast.Call) -> Optional[tuple[ast.expr, Optional[ast.expr]]]:
        """(the clamped value, the upper bound) of a torch clamp, else None."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in CLAMP_NAMES:
            return None
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        if self.qualified(func) & _TORCH_CLAMPS:  # torch.clamp(p, lo, hi)
            value = call.args[0] if call.args else keywords.get("input")
            upper = call.args[2] if len(call.args) > 2 else keywords.get("max")
            return (value, upper) if value is not None else None
        if self.qualified(func.value):
            return None  # a module's function (`np.clip(a, lo, hi)`), not a tensor's method
        return func.value, call.args[1] if len(call.args) > 1 else keywords.get("max")

    def rounds_to_one(self, node: ast.AST) -> bool:
        """`node` is such a clamp (`torch.clamp(p, eps, 1 - eps)`, `p.clamp(min=eps, max=1. - eps)`, `p.clip(...)`)
        of a value not cast to float32 first."""
        parts = self.parts(node) if isinstance(node, ast.Call) else None
        if parts is None:
            return False
        value, upper = parts
        eps = self._eps(upper) if upper is not None else None
        return eps is not None and 0.0 < eps <= BFLOAT16_ROUNDS_TO_ONE and not self._float32(value)

    def in_place(self, call: ast.Call) -> Optional[str]:
        """The name an in-place clamp (`p.clamp_(...)`, `torch.clamp_(p, ...)`) bounds, when it is such a clamp."""
        func = call.func
        if not isinstance(func, ast.Attribute) or not func.attr.endswith("_") or not self.rounds_to_one(call):
            return None
        parts = self.parts(call)
        return parts[0].id if parts is not None and isinstance(parts[0], ast.Name) else None

    def _eps(self, upper: ast.AST) -> Optional[float]:
        """eps of an upper bound `1 - eps` / `1.0 - EPS` / a literal `0.9999`, else None."""
        if isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Sub) and _number(upper.left, {}) == 1:
            return _number(upper.right, self.numbers)
        bound = _number(upper, {})
        return 1.0 - bound if bound is not None and 0.0 < bound < 1.0 else None

    def _float32(self, value: ast.AST) -> bool:
        return _cast_to_float32(value, self.qualified)


def _cast_to_float32(value: ast.AST, qualified: Qualified) -> bool:
    """The value is cast to fp32 on the way in (`p.float()`, `p.to(torch.float32)`, `sigmoid(x.double())`)."""
    for node in walk(value):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _FLOAT32 and not node.args:
                return True
            if node.func.attr in ("to", "type") and any(
                    qualified(a) & _FLOAT32_DTYPES for a in [*node.args, *(k.value for k in node.keywords)]):
                return True
    return False


class _Sigmoids:
    """Sigmoid calls: a 16-bit output is 1.0 from a logit of 7 in bfloat16 (9 in float16, 17 in fp32; torch 2.13)."""

    def __init__(self, qualified: Qualified) -> None:
        self.qualified = qualified

    def rounds_to_one(self, node: ast.AST) -> bool:
        """`torch.sigmoid(x)`, `F.sigmoid(x)`, `x.sigmoid()` of a value not cast to float32 first."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sigmoid"):
            return False
        if self.qualified(node.func) & _TORCH_SIGMOIDS:
            value = node.args[0] if len(node.args) == 1 else None
        elif not node.args and not self.qualified(node.func.value):
            value = node.func.value  # a tensor's own method
        else:
            return False
        return value is not None and not _cast_to_float32(value, self.qualified)


def log_one_minus_sigmoid(tree: ast.Module, qualified: Qualified, star: bool = False) -> bool:
    """A function of the file (or its module-level code) takes `log(1 - sigmoid(x))` or `log1p(-sigmoid(x))`,
    directly or of a name bound to such a sigmoid there, with no clamp: a hand-written binary cross-entropy
    (caser_pytorch's negative-sample loss) that is -inf under bfloat16 autocast from a logit of 7. With `star`
    (the file has a `from module import *`), a `torch` no import of the file binds is the one it brings
    (caser's train_caser.py takes torch from `from utils import *`)."""
    if star and not qualified(ast.Name(id="torch")):
        qualified = _torch_by_star(qualified)
    every = all_nodes(tree)
    scopes: list[Scope] = [tree, *(n for n in every if isinstance(n, _FUNCTIONS))]
    sigmoids = _Sigmoids(qualified)
    for scope in scopes:
        body = [s for s in scope.body if not isinstance(s, _DEFINITIONS)] if isinstance(scope, ast.Module) \
            else scope.body
        nodes = list(own_nodes(body))
        saturating = {node.targets[0].id for node in nodes
                      if isinstance(node, ast.Assign) and len(node.targets) == 1
                      and isinstance(node.targets[0], ast.Name) and sigmoids.rounds_to_one(node.value)}
        if any(_log_one_minus(node, qualified, saturating, sigmoids) for node in nodes if isinstance(node, ast.Call)):
            return True
    return False


def forward_returns_sigmoid(node: ast.ClassDef, qualified: Qualified) -> bool:
    """The class's `forward` returns a sigmoid of a value not cast to float32 (`return torch.sigmoid(x)`, or a
    name its `forward` binds only to one), on every `return`: a link predictor's probability, 1.0 in 16 bits
    from a logit of about 6.2 (bfloat16; 8.3 in float16), so a caller's `log(1 - p)` of it is -inf under autocast
    (ClassFacts.sigmoid_output; analysis/sigmoid_losses.py reads the caller's loss)."""
    forward = next((s for s in node.body if isinstance(s, _FUNCTIONS) and s.name == "forward"), None)
    if forward is None:
        return False
    sigmoids = _Sigmoids(qualified)
    nodes = list(own_nodes(forward.body))
    returns = [r.value for r in nodes if type(r) is ast.Return]
    values = [v for v in returns if v is not None]
    if not values or len(values) < len(returns):
        return False
    # names returned bare: only their bindings are asked about (most forwards return `x`; few bind it to a sigmoid)
    asked = {v.id for v in values if type(v) is ast.Name}
    plain = {id(n.targets[0]): sigmoids.rounds_to_one(n.value) for n in nodes
             if type(n) is ast.Assign and len(n.targets) == 1 and type(n.targets[0]) is ast.Name
             and n.targets[0].id in asked}
    bound = dict.fromkeys(_parameters(forward), False)  # name -> every binding in `forward` is such a sigmoid
    for each in nodes:
        if type(each) is ast.Name and each.id in asked and type(each.ctx) is not ast.Load:
            bound[each.id] = bound.get(each.id, True) and plain.get(id(each), False)
    return all(sigmoids.rounds_to_one(v) or (type(v) is ast.Name and bound.get(v.id, False)) for v in values)


def _torch_by_star(qualified: Qualified) -> Qualified:
    """`qualified`, with a dotted name rooted at an unbound `torch` read as torch's (`torch.log` -> torch.log)."""
    def qualify(node: ast.AST) -> set[str]:
        found = qualified(node)
        if found:
            return found
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        return {".".join(["torch", *reversed(parts)])} if isinstance(node, ast.Name) and node.id == "torch" else set()
    return qualify


def _log_one_minus(call: ast.Call, qualified: Qualified, tiny: set[str],
                   clamps: Union[_Clamps, _Sigmoids]) -> bool:
    """`torch.log(1 - p)`, `torch.log1p(-p)`, `(1 - p).log()`, `(-p).log1p()` of a name in `tiny` (or `p[i]`
    of one), or of such a clamp itself."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_NAMES:
        return False
    if qualified(func) & {"torch.log", "torch.log1p"}:
        if len(call.args) != 1:
            return False
        argument = call.args[0]
    elif not call.args and not call.keywords and not qualified(func.value):
        argument = func.value  # a tensor's own method
    else:
        return False
    operand = one_minus(func.attr, argument, lambda node: _number(node, {}))
    if operand is None:
        return False
    if isinstance(operand, ast.Subscript):
        operand = operand.value
    return (isinstance(operand, ast.Name) and operand.id in tiny) or clamps.rounds_to_one(operand)


def one_minus(log: str, argument: ast.expr, number: Callable[[ast.expr], Optional[float]],
              eps_below: Optional[float] = None) -> Optional[ast.expr]:
    """`p` of what `log` (`"log"` or `"log1p"`) is taken of: `1 - p` for log, `-p` for log1p; with `eps_below`,
    also `1 - p + eps` for an `eps` that `number` reads as at least 0 and below it. The one reading of the
    shape for the clamp facts here and the sigmoid-output losses (analysis/sigmoid_losses.py), each of which
    resolves the `log` call its own way."""
    if log == "log":
        if eps_below is not None and isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Add):
            eps = number(argument.right)
            if eps is None or not 0.0 <= eps < eps_below:
                return None
            argument = argument.left
        if not (isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Sub)
                and number(argument.left) == 1.0):
            return None
        return argument.right
    if not (isinstance(argument, ast.UnaryOp) and isinstance(argument.op, ast.USub)):
        return None
    return argument.operand


def _number(node: ast.AST, names: dict[str, Optional[float]]) -> Optional[float]:
    """A numeric literal, or a name `names` binds to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _parameters(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> frozenset[str]:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return frozenset(a.arg for a in every if a is not None)


def _numbers(nodes: list[ast.AST], parameters: frozenset[str] = frozenset(),
             outer: Optional[dict[str, Optional[float]]] = None) -> dict[str, Optional[float]]:
    """The names a scope (its own nodes) binds once, to a numeric literal (None for a name bound otherwise, or a
    parameter), over the names of the module (`outer`) it does not bind."""
    stores: dict[str, int] = {}
    literal: dict[str, float] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _number(node.value, {})
            if value is not None:
                literal[node.targets[0].id] = value
    out: dict[str, Optional[float]] = dict(outer or {})
    for name, count in stores.items():
        out[name] = literal.get(name) if count == 1 else None
    for name in parameters:
        out[name] = None
    return out


def forward_overflows_float16(tree: ast.Module) -> bool:
    """A `forward` method of a class of the file holds a float literal past float16's range (`masked_fill(mask,
    -1e9)`, Pyraformer's Modules.py): under float16 autocast the fill raises, so the model trains in bfloat16 or
    fp32 only. The attention module is usually imported by the model the training script builds, several
    modules away (FileFacts.forward_overflows_float16, joined by the project view)."""
    for node in class_defs(tree):
        for item in node.body:
            if isinstance(item, _FUNCTIONS) and item.name == "forward" and any(
                    isinstance(n, ast.Constant) and type(n.value) is float
                    and FLOAT16_MAX < abs(n.value) < float("inf") for n in walk(item)):
                return True
    return False


# torch factories whose result is float32 unless given a dtype (not core/torch_api.py's tables, which import
# project/facts.py, which imports this module)
FLOAT32_FACTORY_NAMES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn"})  # FileFacts' gate, cheap
_FLOAT32_FACTORIES = frozenset(f"torch.{name}" for name in FLOAT32_FACTORY_NAMES)


def forward_index_puts_float32(tree: ast.Module, qualified: Qualified) -> bool:
    """A `forward` method of a class of the file writes a module's output into a float32 buffer it made, through a
    mask (`rgb = torch.zeros(n, 3, device=d)`, `rgb[mask] = self.render(x)`: TensoRF's tensorBase.py). Under
    autocast the output is 16-bit and index_put requires the dtypes to match, so the first step raises; a plain
    slice assignment casts and does not count."""
    for node in class_defs(tree):
        for item in node.body:
            if isinstance(item, _FUNCTIONS) and item.name == "forward" and _index_puts_output(item, qualified):
                return True
    return False


def _index_puts_output(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], qualified: Qualified) -> bool:
    buffers: set[str] = set()  # names bound to a float32 factory's result
    masks: set[str] = set()  # names bound to a comparison or a boolean combination of tensors
    outputs: set[str] = set()  # names bound to what a submodule of `self` returns
    puts: list[ast.Assign] = []
    for node in walk(function):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Subscript):
            puts.append(node)
        elif isinstance(target, ast.Name):
            if _float32_factory(value, qualified):
                buffers.add(target.id)
            elif _is_mask(value):
                masks.add(target.id)
            elif _self_call(value):
                outputs.add(target.id)
    for put in puts:
        target = put.targets[0]
        assert isinstance(target, ast.Subscript)
        index, value = target.slice, put.value
        if not (isinstance(target.value, ast.Name) and target.value.id in buffers):
            continue
        if not (_is_mask(index) or (isinstance(index, ast.Name) and index.id in masks)):
            continue
        if _self_call(value) or (isinstance(value, ast.Name) and value.id in outputs):
            return True
    return False


def _float32_factory(node: ast.AST, qualified: Qualified) -> bool:
    """`torch.zeros(...)` and its kin without a dtype, or with a float32 one."""
    if not isinstance(node, ast.Call) or not qualified(node.func) & _FLOAT32_FACTORIES:
        return False
    dtype = next((k.value for k in node.keywords if k.arg == "dtype"), None)
    return dtype is None or bool(qualified(dtype) & {"torch.float32", "torch.float"})


def _is_mask(node: ast.AST) -> bool:
    """A comparison (`w > t`), its negation (`~m`) or a combination (`a & b`): a boolean tensor, so an index_put."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return _is_mask(node.operand) or isinstance(node.operand, ast.Name)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        return _is_mask(node.left) or _is_mask(node.right)
    return False


def _self_call(node: ast.AST) -> bool:
    """`self.mlp(x)`: what a submodule (or a method) returns, 16-bit under autocast when it ends in a matmul."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self")


# casts and reductions after which a tensor is no longer 16-bit floating point (`.numpy()` then works); `.to(...)`
# is not one (`.to("cpu")` keeps the dtype): a hazard seen where there is none only makes the fix float16
_NOT_16_BIT = frozenset({"float", "double", "long", "int", "bool", "argmax", "argmin", "tolist", "item"})


def numpy_readers(tree: ast.Module, qualified: Optional[Qualified] = None) -> dict[str, tuple[int, ...]]:
    """Top-level functions that read a tensor they are handed as numpy (`torch.sigmoid(output).data.cpu()
    .numpy()`: pytorch-nested-unet's metrics.py; `np.percentile(grad.cpu(), q)`) with no cast on the way, with the
    positions of the parameters read so. numpy has no bfloat16: handed a model output computed under bfloat16
    autocast, they raise TypeError (float16 converts)."""
    found: dict[str, tuple[int, ...]] = {}
    for statement in tree.body:
        if not isinstance(statement, _FUNCTIONS):
            continue
        reads = list(_numpy_reads(statement.body, qualified))
        if not reads:
            continue
        positional = [a.arg for a in (*statement.args.posonlyargs, *statement.args.args)]
        read = tuple(i for i, name in enumerate(positional) if _any_read(reads, {name}))
        if read:
            found[statement.name] = read
    return found


def forward_reads_numpy(tree: ast.Module, qualified: Optional[Qualified] = None) -> bool:
    """A `forward` method of a class of the file reads a value it computes as numpy, no cast on the way
    (`mu = estimate_mu(feature.detach().cpu().numpy())` after `feature = self.bottleneck(x)`): under bfloat16
    autocast that value is bfloat16 and the model's first forward raises TypeError (float16 converts). The model
    usually lives in a module the training script imports (FileFacts.forward_reads_numpy, joined by the project
    view as the other `forward_*` facts are)."""
    for node in class_defs(tree):
        for item in node.body:
            if isinstance(item, _FUNCTIONS) and item.name == "forward":
                reads = list(_numpy_reads(item.body, qualified))
                bound = {n.id for n in walk(item) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} \
                    if reads else set()
                if bound and _any_read(reads, bound):
                    return True
    return False


def reads_as_numpy(statements: list[ast.stmt], names: Union[set[str], frozenset[str]],
                   qualified: Optional[Qualified] = None) -> bool:
    """A `.numpy()` call in `statements` whose receiver uses one of `names` and casts nothing on the way, or, given
    `qualified` (a dotted name -> what it may stand for, through the imports), a numpy function handed such a
    tensor (`np.percentile(grad.cpu(), q)`: numpy converts it through `Tensor.__array__`, which calls `.numpy()`)."""
    return _any_read(_numpy_reads(statements, qualified), names)


def _numpy_reads(statements: list[ast.stmt], qualified: Optional[Qualified]) -> Iterator[tuple[bool, ast.AST]]:
    """What `statements` read as numpy: (True, the receiver of a `.numpy()` call) and (False, an argument of a
    numpy function, given `qualified`)."""
    for statement in statements:
        for node in walk(statement):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr == "numpy":
                yield True, node.func.value
            elif qualified is not None and node.args and any(q.startswith("numpy.") for q in qualified(node.func)):
                for argument in node.args:
                    yield False, argument


def _any_read(reads: Iterable[tuple[bool, ast.AST]], names: Union[set[str], frozenset[str]]) -> bool:
    """One of `reads` is a 16-bit tensor of `names`: a `.numpy()` receiver using one with no cast on the way, or a
    numpy function's argument that is one, through dtype-keeping steps only."""
    return any(_uncast_use(expr, names) if receiver else _tensor_of(expr, names) for receiver, expr in reads)


# what a tensor handed to numpy may go through and stay 16-bit (`grad.detach().cpu()`, `x.data[0]`); of them, what
# only a tensor has (a numpy array or a number has no `.cpu()`): an argument is taken for a 16-bit tensor only
# through one of those (`grads.cpu()`, not `np.sqrt(d_k)` nor `np.mean(losses)`), and never past another step
# (`len(x)`, `x.size(0)`, `x.float()`)
_KEEPS_DTYPE = frozenset({"cpu", "cuda", "detach", "data", "clone", "contiguous", "view", "reshape", "squeeze",
                          "unsqueeze", "flatten", "t", "T", "permute", "transpose"})
_TENSOR_ONLY = frozenset({"cpu", "cuda", "detach", "clone", "contiguous", "unsqueeze", "permute"})


def _tensor_of(argument: ast.AST, names: Union[set[str], frozenset[str]]) -> bool:
    """The argument is a chain of dtype-keeping attributes, methods and indexing on one of `names`, with at least
    one step only a tensor takes."""
    tensor = False
    while True:
        if isinstance(argument, ast.Name):
            return tensor and argument.id in names
        if isinstance(argument, ast.Subscript):
            argument = argument.value
            continue
        if isinstance(argument, ast.Call) and isinstance(argument.func, ast.Attribute):
            argument = argument.func
        if not (isinstance(argument, ast.Attribute) and argument.attr in _KEEPS_DTYPE):
            return False
        tensor = tensor or argument.attr in _TENSOR_ONLY
        argument = argument.value


def _uncast_use(receiver: ast.AST, names: Union[set[str], frozenset[str]]) -> bool:
    uses = False
    for node in walk(receiver):
        if isinstance(node, ast.Attribute) and node.attr in _NOT_16_BIT:
            return False
        if isinstance(node, ast.Name) and node.id in names:
            uses = True
    return uses


# binary_cross_entropy, called or built as a module: CUDA autocast refuses it ("unsafe to autocast"), so the first step
# of a forward pass and loss wrapped in autocast raises (analysis/amp_fix.py keeps it out of the region it wraps)
BCE_FUNCTIONS = frozenset({"torch.nn.functional.binary_cross_entropy", "torch.binary_cross_entropy"})
BCE_MODULES = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss"})
BCE_NAMES = frozenset({"binary_cross_entropy", "BCELoss"})  # FileFacts' gate, cheap


def bce_losses(tree: ast.Module, qualified: Qualified) -> tuple[str, ...]:
    """The module-level classes and functions of the file that compute binary_cross_entropy (call it, or build a
    BCELoss): a training step handed its loss as a parameter may be handed one of them (Unsupervised-Classification's
    `scan_train(..., criterion, ...)` gets losses.py's SCANLoss, whose `self.bce = nn.BCELoss()`). So does one that
    calls a BCELoss instance bound once at module level (`bce_loss = nn.BCELoss()`, then `bce_loss(d0, labels)` in
    U-2-Net's `muti_bce_loss_fusion`, blind22), or a module-level function found so, by a name it does not bind
    itself."""
    definitions = [s for s in tree.body if isinstance(s, (ast.ClassDef, *_FUNCTIONS))]
    direct: set[int] = set()
    calls: dict[int, set[str]] = {}  # the names each definition calls
    for statement in definitions:
        names: set[str] = set()
        for node in walk(statement):
            if isinstance(node, ast.Call):
                if qualified(node.func) & (BCE_FUNCTIONS | BCE_MODULES):
                    direct.add(id(statement))
                    break
                if isinstance(node.func, ast.Name):
                    names.add(node.func.id)
        else:
            calls[id(statement)] = names
    found = set(direct)
    computing = _module_bce_instances(tree, qualified, direct)  # the names whose call computes binary_cross_entropy
    functions = {s.name: s for s in definitions if isinstance(s, _FUNCTIONS)}
    if computing:
        # the module-level names each definition calls and does not bind itself, read only for a definition that
        # calls one of `computing` by name at all (within `calls`: most definitions call none)
        called: dict[int, set[str]] = {}
        changed = True
        while changed:  # through the calls between the file's functions, to a fixed point
            changed = False
            for statement in definitions:
                key = id(statement)
                if key in found or not calls.get(key, set()) & computing:
                    continue
                if key not in called:
                    called[key] = calls[key] - _bound_within(statement)
                if called[key] & computing:
                    found.add(id(statement))
                    changed = True
                    if functions.get(statement.name) is statement:
                        computing.add(statement.name)
    return tuple(s.name for s in definitions if id(s) in found)


def _module_bce_instances(tree: ast.Module, qualified: Qualified, direct: set[int]) -> set[str]:
    """Module-level names bound once, and by an assignment of a BCELoss built there (`bce_loss = nn.BCELoss()`),
    and the module-level functions that compute binary_cross_entropy themselves, by its call or a BCELoss built
    (`direct`: the ids of the module-level definitions `bce_losses` found doing so)."""
    bindings: dict[str, list[ast.AST]] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for node in walk(target):
                    if isinstance(node, ast.Name):
                        bindings.setdefault(node.id, []).append(statement)
        elif isinstance(statement, (ast.ClassDef, *_FUNCTIONS)):
            bindings.setdefault(statement.name, []).append(statement)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                bindings.setdefault((alias.asname or alias.name).split(".", 1)[0], []).append(statement)
        else:  # bindings under `if`, `try`, `for`, `with` at module level: the name may be bound otherwise
            for node in walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bindings.setdefault(node.id, []).append(statement)
    found: set[str] = set()
    for name, where in bindings.items():
        if len(where) != 1:
            continue
        binding = where[0]
        if isinstance(binding, ast.Assign) and len(binding.targets) == 1 \
                and isinstance(binding.targets[0], ast.Name) and isinstance(binding.value, ast.Call) \
                and qualified(binding.value.func) & BCE_MODULES:
            found.add(name)
        elif isinstance(binding, _FUNCTIONS) and id(binding) in direct:
            found.add(name)
    return found


def _bound_within(definition: ast.AST) -> set[str]:
    """The names a class or function binds inside itself (parameters, assignments, imports, nested
    definitions, loop and `with` targets): a call of one of them is not a call of the module-level name."""
    bound: set[str] = set()
    for node in walk(definition):
        if node is definition:
            args = getattr(node, "args", None)
        elif isinstance(node, (ast.ClassDef, *_FUNCTIONS)):
            bound.add(node.name)
            args = getattr(node, "args", None)
        elif isinstance(node, ast.Lambda):
            args = node.args
        else:
            args = None
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
        if args is not None:
            bound.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
            bound.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return bound


# layers autocast runs in 16 bits (its lower-precision list: linear and convolutions)
_AUTOCAST_16_BIT_LAYERS = frozenset({f"torch.nn.{name}" for name in (
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")})
# tensor methods that keep the dtype of what they are called on (a reshape, a masked fill, a layout change)
_SAME_DTYPE_METHODS = frozenset({
    "view", "reshape", "contiguous", "transpose", "permute", "flatten", "unflatten", "squeeze", "unsqueeze",
    "masked_fill", "masked_fill_", "clone", "detach", "expand", "repeat", "narrow", "chunk", "split", "t"})


def forward_feeds_function_16_bit(tree: ast.Module, qualified: Qualified) -> bool:
    """A `forward` method of a class of the file hands a custom autograd Function (`Op.apply(value, ...)`) a value
    that one of its own linear or convolution layers returned, reshaped at most (every binding of the name in the
    method is `self.proj(x)` of a layer `__init__` binds to `nn.Linear`/`nn.Conv*`, or the name's own
    `.view(...)`, `.masked_fill(...)` and alike): under autocast that value is 16-bit, and `apply` does not cast
    (only `custom_fwd(cast_inputs=...)` would), so a native kernel behind the Function that takes float and double
    only raises (Deformable DETR's MSDeformAttn hands `value_proj`'s output to MSDeformAttnFunction). A value
    that passed through anything else (`torch.exp(k)`, `k * v`, which autocast computes in fp32 or promotes)
    does not count."""
    for node in class_defs(tree):
        forwards = [item for item in node.body if isinstance(item, _FUNCTIONS) and item.name == "forward"
                    and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "apply"
                            for n in walk(item))]
        if not forwards:
            continue  # (most classes: no `forward` calling `.apply`; their `__init__` is not read)
        layers = _layer_attributes(node, qualified)
        if layers and any(_feeds_function(item, layers) for item in forwards):
            return True
    return False


def _layer_attributes(node: ast.ClassDef, qualified: Qualified) -> frozenset[str]:
    """The attributes `__init__` binds to a linear or convolution layer (`self.value_proj = nn.Linear(d, d)`)."""
    out: set[str] = set()
    for item in node.body:
        if not (isinstance(item, _FUNCTIONS) and item.name == "__init__"):
            continue
        for sub in walk(item):
            if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call) \
                    and qualified(sub.value.func) & _AUTOCAST_16_BIT_LAYERS:
                out.update(t.attr for t in sub.targets if isinstance(t, ast.Attribute)
                           and isinstance(t.value, ast.Name) and t.value.id == "self")
    return frozenset(out)


def _feeds_function(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], layers: frozenset[str]) -> bool:
    bindings: dict[str, list[ast.AST]] = {}
    applies: list[ast.Call] = []
    for node in walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bindings.setdefault(target.id, []).append(node.value)
                elif isinstance(target, (ast.Tuple, ast.List)):  # unpacked: of unknown origin
                    for element in target.elts:
                        if isinstance(element, ast.Name):
                            bindings.setdefault(element.id, []).append(element)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            bindings.setdefault(node.target.id, []).append(node.target)  # of unknown origin
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply" \
                and isinstance(node.func.value, (ast.Name, ast.Attribute)):
            applies.append(node)
    for call in applies:
        for argument in call.args:
            if isinstance(argument, ast.Name) and _layer_output(argument.id, bindings, layers):
                return True
            if _is_layer_call(argument, layers):
                return True
    return False


def _is_layer_call(node: ast.AST, layers: frozenset[str]) -> bool:
    return _self_call(node) and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in layers


def _layer_output(name: str, bindings: dict[str, list[ast.AST]], layers: frozenset[str]) -> bool:
    """Every binding of `name` is a layer's output or a same-dtype method of `name` itself, and one is a layer's."""
    values = bindings.get(name)
    if not values:
        return False  # a parameter of the method: of unknown origin
    origin = False
    for value in values:
        if _is_layer_call(value, layers):
            origin = True
            continue
        node = value
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _SAME_DTYPE_METHODS:
            node = node.func.value
        if _is_layer_call(node, layers):
            origin = True
        elif not (isinstance(node, ast.Name) and node.id == name and node is not value):
            return False
    return origin
