"""The widths of a model's layers, read from its class with CPython's `ast` (for GPU001's impact floor).

Mixed precision pays off when the matrix multiplications are wide enough for tensor cores; a
2 -> 32 -> 1 regression or a 16-unit graph network is launch-bound and gains nothing. This module
reduces an `nn.Module` class to the layers its `__init__` (and the methods `__init__` calls) build,
each as plain data: a layer with widths (`nn.Linear(in, out)`, `nn.Conv2d(in, out, k)`, an
`nn.Parameter(torch.empty(in, out))`), another class of the project built with arguments, or
something that cannot be sized (a library model, a module handed in). Widths are tokens, resolved
later against the call site (analysis/model_widths.py): an integer, an `__init__` parameter, a
configuration attribute (`args.hidden`, `config.n_embd`), a module-level constant, or unknown. A layer
built in a loop over the consecutive pairs of a list (`[in] + args.layers + [out]`) holds the pair's two
sizes as markers and the list as its `chain` (see `pair_loops`).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Iterable, Iterator, Optional, Protocol, Union

from gpulint.project.ast_nodes import all_nodes, children, fast_walk, own_nodes, walk, walk_with_parents
from gpulint.records import dataclass

# layer kinds
DIMS = "dims"  # a layer whose matmul width is the smallest of `dims`
MODULE = "module"  # another class built with `dims` as positional and `keywords` as keyword arguments
OPAQUE = "opaque"  # a module whose width cannot be read (a library model, built by a helper)
# a module handed to `__init__` and kept on self (`self.model = model`, then `self.model(x)` in some method): as
# wide as what the caller passes for that parameter (`dims`: the parameter's name), read where the wrapper is built
HANDED = "handed"

UNKNOWN = "?"
REST = "..."  # MODULE: the positional arguments from here on are a splat (`*self.layers`), each parameter unknown
Qualify = Callable[[ast.AST], set[str]]

# torch.nn layers with a width: the positions (and keywords) of the sizes that bound their matmuls
_TORCH_LAYERS: dict[str, tuple[tuple[int, str], ...]] = {
    "Linear": ((0, "in_features"), (1, "out_features")),
    "Bilinear": ((0, "in1_features"), (2, "out_features")),
    "LazyLinear": ((0, "out_features"),),
    "Conv1d": ((0, "in_channels"), (1, "out_channels")),
    "Conv2d": ((0, "in_channels"), (1, "out_channels")),
    "Conv3d": ((0, "in_channels"), (1, "out_channels")),
    "ConvTranspose1d": ((0, "in_channels"), (1, "out_channels")),
    "ConvTranspose2d": ((0, "in_channels"), (1, "out_channels")),
    "ConvTranspose3d": ((0, "in_channels"), (1, "out_channels")),
    "Embedding": ((1, "embedding_dim"),),
    "EmbeddingBag": ((1, "embedding_dim"),),
    "RNN": ((0, "input_size"), (1, "hidden_size")),
    "LSTM": ((0, "input_size"), (1, "hidden_size")),
    "GRU": ((0, "input_size"), (1, "hidden_size")),
    "RNNCell": ((0, "input_size"), (1, "hidden_size")),
    "LSTMCell": ((0, "input_size"), (1, "hidden_size")),
    "GRUCell": ((0, "input_size"), (1, "hidden_size")),
    "MultiheadAttention": ((0, "embed_dim"),),
    "TransformerEncoderLayer": ((0, "d_model"),),
    "TransformerDecoderLayer": ((0, "d_model"),),
}
# recurrent layers: the gates each step's two matmuls compute at once (input x gates*hidden, hidden x gates*hidden)
RECURRENT_GATES: dict[str, int] = {"RNN": 1, "RNNCell": 1, "LSTM": 4, "LSTMCell": 4, "GRU": 3, "GRUCell": 3}
# what stacks a recurrent layer (its later layers read hidden, or twice hidden both ways), when passed
_RECURRENT_STACKING = (("num_layers", 2), ("bidirectional", 6))
# torch.nn.Transformer's d_model defaults to 512 when not given
_TORCH_DEFAULTS: dict[str, tuple[str, int]] = {"Transformer": ("d_model", 512)}
# graph layers (PyG, DGL): Conv(in_channels, out_channels, ...)
_GRAPH_PACKAGES = ("torch_geometric.nn", "dgl.nn", "ogb.graphproppred")
# Quantum-circuit simulators whose circuits are torch modules, by the qualified names of their layers and base
# classes: torchquantum (`tq.QuantumModule`, `tq.RandomLayer`, `tq.MeasureAll`, `tq.QuantumDevice`: the whole
# package), PennyLane's `qml.qnn.TorchLayer` and Qiskit machine learning's `TorchConnector`. What they compute is
# a state vector of complex amplitudes (complex64/complex128) that each gate multiplies by its 2x2 or 4x4 matrix;
# autocast casts real floating-point matmuls and convolutions only (a complex64 matmul stays complex64 under it:
# torch 2.13, CPU autocast), and their sizes are qubit counts, not matmul widths. So such a layer has no width
# that mixed precision can lower (NO_WIDTH): a model built only of them is below any width floor, and a hybrid
# model is as wide as its classical torch.nn layers. The one place gpulint knows these libraries.
QUANTUM_SIMULATORS = ("torchquantum.", "pennylane.qnn.", "qiskit_machine_learning.connectors.")
NO_WIDTH = "0"  # the width token of a layer without a matmul width of its own


def quantum_simulator(qualified: Iterable[str]) -> bool:
    """One of these qualified names is a quantum-circuit simulator's layer or module (QUANTUM_SIMULATORS)."""
    return any(name.startswith(QUANTUM_SIMULATORS) for name in qualified)


# tensor factories whose positional arguments are a parameter's shape
_FACTORIES = frozenset({"empty", "zeros", "ones", "randn", "rand", "Tensor", "FloatTensor"})
# methods that hand back a tensor or module of the same shape (moved, cast): `torch.FloatTensor(a, b).cuda()`
_SAME_SHAPE = frozenset({"cuda", "to", "float", "double", "half", "bfloat16", "requires_grad_"})
# calls that build nothing with weights (or only containers whose children are read anyway)
_NO_WIDTH = frozenset({
    "super", "len", "int", "float", "range", "list", "tuple", "dict", "zip", "enumerate", "max", "min", "sum", "abs",
    "round", "isinstance", "getattr", "setattr", "hasattr", "print", "sorted", "reversed", "map", "filter", "str",
    "bool", "divmod", "pow",
})


@dataclass(frozen=True)
class Layer:
    kind: str  # DIMS, MODULE, OPAQUE or HANDED
    name: str  # the layer's class as spelled in the file
    dims: tuple[str, ...] = ()  # width tokens (DIMS), or the positional argument tokens (MODULE)
    # MODULE: keyword argument tokens; a recurrent DIMS layer: `num_layers` and `bidirectional` where passed
    keywords: tuple[tuple[str, str], ...] = ()
    # built once per consecutive pair of a list (`pair_loops`): the list's parts, each a width token (one entry)
    # or LIST + an attribute token (`[@layers`: the entries of a list-valued option); the layer's tokens name the
    # pair's entries as PAIR_FIRST and PAIR_SECOND
    chain: tuple[str, ...] = ()


FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
ArgumentToken = Callable[[int, str], Optional[str]]  # (position, keyword) -> the token passed there, or None


# models of graph libraries built from widths: (in_channels, hidden_channels, num_layers, out_channels)
_GRAPH_MODELS = frozenset({"GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN", "BasicGNN"})
# convolutions built around a module they are given (`GINConv(nn)`): their width is that module's, read by itself
_NN_CONVS = frozenset({"GINConv", "GINEConv", "DynamicEdgeConv", "PointNetConv", "PPFConv"})
# OGB's molecule encoders: sums of embeddings `emb_dim` wide
_GRAPH_EMBEDDINGS = frozenset({"AtomEncoder", "BondEncoder"})
# wrappers that turn a module built elsewhere (read where it is built) into a heterogeneous one
GRAPH_WRAPPERS = frozenset({"to_hetero", "to_hetero_with_bases"})


def graph_layer(last: str, argument: ArgumentToken) -> "Optional[Layer] | bool":
    """A layer or model of a graph library (PyG, DGL), from how its arguments read; False when `last` is
    none of them. A convolution's widths are its in and out channels (`GCNConv(in, out)`); one given no
    channels (`AGNNConv()`, `GINConv(nn)`, whose nn is read by itself) has no width of its own; a library
    model is as wide as its hidden channels; an `MLP([...])` as its widest consecutive pair."""
    if last in _NN_CONVS:
        return None
    if last.endswith("Conv"):
        dims = (argument(0, "in_channels"), argument(1, "out_channels"))
        if dims == (None, None):
            return None
        return Layer(DIMS, last, tuple(d or UNKNOWN for d in dims))
    if last in _GRAPH_MODELS:
        return Layer(DIMS, last, (argument(1, "hidden_channels") or UNKNOWN,))
    if last in _GRAPH_EMBEDDINGS:
        return Layer(DIMS, last, (argument(0, "emb_dim") or UNKNOWN,))
    if last in GRAPH_WRAPPERS:
        return None
    hidden = argument(-1, "hidden_channels")
    if hidden is not None:  # PMLP(..., hidden_channels=16, ...), any library model built around a hidden width
        return Layer(DIMS, last, (hidden,))
    if last.endswith("Pooling"):  # SAGPooling(in_channels): scores nodes with a narrow GNN
        return Layer(DIMS, last, (argument(0, "in_channels") or UNKNOWN,))
    return False


def mlp_layer(channels: list[str]) -> Layer:
    """A graph library's `MLP([in, hidden, ..., out])`: each consecutive pair is a Linear, so no matmul is wider
    than its widest inner channel count; read when the inner counts are one token (`[in, h, h, out]`)."""
    inner = set(channels[1:-1])
    if len(channels) == 2:
        return Layer(DIMS, "MLP", tuple(channels))
    return Layer(DIMS, "MLP", (inner.pop(),) if len(inner) == 1 else (UNKNOWN,))


def torch_layer(last: str, argument: ArgumentToken) -> Optional[Layer]:
    """A torch.nn layer with a width (`Linear`, `Conv2d`, `Embedding`, ...), from how its arguments read;
    None for any other torch.nn name. Shared by the `ast` facts and the LibCST rules.

    A convolution's matmul is as wide as its channels times its kernel size (a 3x3 convolution over
    64 channels multiplies through 64 * 9 inputs per output), so its kernel size is a factor (`*3`)."""
    if last in _TORCH_LAYERS:
        dims = tuple(argument(p, k) or UNKNOWN for p, k in _TORCH_LAYERS[last])
        if last.startswith("Conv"):
            kernel = argument(2, "kernel_size")
            dims += ("*" + (kernel if kernel is not None and kernel != UNKNOWN and kernel[0].isdigit() else UNKNOWN),)
        stacking: tuple[tuple[str, str], ...] = ()
        if last in RECURRENT_GATES and not last.endswith("Cell"):
            stacking = tuple((k, given) for k, p in _RECURRENT_STACKING if (given := argument(p, k)) is not None)
        return Layer(DIMS, last, dims, stacking)
    if last in _TORCH_DEFAULTS:
        keyword, default = _TORCH_DEFAULTS[last]
        return Layer(DIMS, last, (argument(0, keyword) or str(default),))
    return None


def _calls(fn: FunctionNode) -> Iterator[ast.Call]:
    """The calls in a function's own code (not in nested functions or classes), in source order."""
    found = [node for node in own_nodes(fn.body) if type(node) is ast.Call]
    yield from sorted(found, key=lambda c: (c.lineno, c.col_offset))


PRODUCT = "|"  # `hidden * heads` -> "=hidden|=heads": a product of tokens
# the two entries of the consecutive pair a loop builds a layer from (`dims[i]`, `dims[i + 1]`), bound per pair
PAIR_FIRST, PAIR_SECOND = "=%0", "=%1"
LIST = "["  # a chain part that is a list of entries (`[@layers`), not one entry
Mark = Callable[[ast.AST], Optional[str]]  # an expression a loop gives a pair marker, else None


def width_token(node: Optional[ast.AST], params: frozenset[str], module_ints: dict[str, int],
                mark: Optional[Mark] = None) -> str:
    """An integer, `=param`, `@attribute`, a pair marker (`mark`), a product of those, or unknown."""
    if node is None:
        return UNKNOWN
    if mark is not None:
        marked = mark(node)
        if marked is not None:
            return marked
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left = width_token(node.left, params, module_ints, mark)
        right = width_token(node.right, params, module_ints, mark)
        return UNKNOWN if UNKNOWN in (left, right) else f"{left}{PRODUCT}{right}"
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value)
    if isinstance(node, ast.Tuple) and node.elts and all(
            isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
        return str(max(e.value for e in node.elts))  # type: ignore[attr-defined]  # a (5, 5) kernel
    if isinstance(node, ast.Name):
        if node.id in params:
            return f"={node.id}"
        if node.id in module_ints:
            return str(module_ints[node.id])
        return UNKNOWN
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"@{node.attr}"  # `args.hidden`, `config.n_embd`, `self.dim`
    return UNKNOWN


def _argument(call: ast.Call, position: int, keyword: str) -> Optional[ast.AST]:
    """The argument at `position` (-1: keyword only) or passed as `keyword`."""
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    if position < 0:
        return None
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return None
    return positional[position] if position < len(positional) else None


def class_layers(cls: ast.ClassDef, qualify: Qualify, local_classes: frozenset[str], imported: dict[str, str],
                 module_ints: dict[str, int]) -> tuple[Optional[tuple[Layer, ...]], tuple[str, ...], dict[str, int]]:
    """(layers, `__init__` parameters in order, their integer defaults) of an nn.Module class; layers None
    when the class has no `__init__` of its own (its width is its base's, which is not read here).

    `local_classes`: the file's top-level classes; `imported`: names bound by `from` imports, with the
    import target as the file spells it (".layers.Block"), so a project class can be looked up later."""
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if init is None:
        return None, (), {}
    positional = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    names = positional + [a.arg for a in init.args.kwonlyargs]
    defaults: dict[str, int] = {}
    for arg, default in zip(reversed(init.args.posonlyargs + init.args.args), reversed(init.args.defaults)):
        if isinstance(default, ast.Constant) and type(default.value) is int:
            defaults[arg.arg] = default.value
    for arg, default in zip(init.args.kwonlyargs, init.args.kw_defaults):  # type: ignore[assignment]
        if isinstance(default, ast.Constant) and type(default.value) is int:
            defaults[arg.arg] = default.value
    params = frozenset(names)
    me = (init.args.posonlyargs + init.args.args)[0].arg if init.args.posonlyargs + init.args.args else "self"
    # what `__init__` keeps of its arguments (`self.args = args`): a module handed in, or a configuration
    kept: dict[str, set[str]] = {}
    for n in walk(init):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in params:
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                    kept.setdefault(t.attr, set()).add(n.value.id)
    handed = set(kept)
    layers: list[Layer] = []
    pending: list[tuple[FunctionNode, frozenset[str]]] = [(init, params)]
    seen = {"__init__"}
    while pending:
        fn, known = pending.pop()
        calls = list(_calls(fn))
        inputs = {id(arg) for outer in calls for arg in [*outer.args, *(k.value for k in outer.keywords)]
                  if _is_input_call(arg, me, qualify)}
        loops = pair_loops(fn, cls, me, frozenset(handed), known, module_ints)

        def reads(call: ast.Call, known: frozenset[str] = known) -> bool:
            return _layer(call, qualify, known, local_classes, imported, module_ints) is not None or any(
                q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] not in _CONTAINERS for q in qualify(call.func))

        splats = any(isinstance(a, ast.Starred) for c in calls for a in c.args)
        own_lists = _filled_with_layers(fn, me, reads) if splats else frozenset()
        for call in calls:
            if id(call) in inputs:
                continue  # HANConv(..., metadata=data.metadata()): a method's result handed in, not a layer
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
                if func.attr in methods and func.attr not in seen and len(seen) < 8:
                    seen.add(func.attr)
                    pending.append((methods[func.attr], frozenset()))  # a helper's own parameters are unknown
                continue
            mark, chain = loops.get(id(call), (None, None))
            layer = _layer(call, qualify, known, local_classes, imported, module_ints, mark, own_lists)
            if layer is not None and chain is not None and _marked(layer):
                layer = replace(layer, chain=chain)
            if layer is not None:
                layers.append(layer)
    # a module handed in (`self.backbone = backbone`) and called in any method (`forward`, or a `loss` or
    # `p_losses` a trainer calls): part of the parameters, as wide as what the caller passes for it
    called: list[str] = []
    for method in methods.values() if handed else ():
        for node in all_nodes(method):  # kept: parameter_tensors reads every method again
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in handed \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == me \
                    and node.func.attr not in called:
                called.append(node.func.attr)
    for attribute in called:
        sources = kept[attribute]
        # kept from one parameter: the caller's module; from several (`self.m = a` or `b`): not read
        layers.append(Layer(HANDED, attribute, tuple(sources)) if len(sources) == 1 else Layer(OPAQUE, attribute))
    return tuple(layers), tuple(names), defaults


# ------------------------------------------------------------------------------------------------
# layers built in a loop over the consecutive pairs of a list: `[in] + args.layers + [out]`

# methods that change a list in place
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
                       "__delitem__", "__iadd__"})
_Loops = dict[int, tuple[Mark, Optional[tuple[str, ...]]]]


def pair_loops(fn: FunctionNode, cls: ast.ClassDef, me: str, holders: frozenset[str], params: frozenset[str],
               module_ints: dict[str, int]) -> _Loops:
    """The calls inside a function's loops over the consecutive pairs of a list (`dims[i]`, `dims[i + 1]`),
    each with the loop's pair markers and the list's parts (Layer.chain; None when the list is not read).

    Loops read: `for i in range(len(L) - 1)` (or `range(0, len(L) - 1)`) and `for i, x in enumerate(L[:-1])`
    over `L[i]`, `L[i + 1]` (and `x`); `for i in range(1, len(L))` over `L[i - 1]`, `L[i]`; `for a, b in
    zip(L[:-1], L[1:])` or `zip(L, L[1:])`. Each index reaches only consecutive pairs; the loop's names must
    not be bound again in its body. The list L is a literal, a sum of literals and list-valued options
    (`[self.in_dim] + self.args.layers + [n_classes]`), or a name or attribute assigned one in the same block
    before the loop, with nothing between (nor the loop) that may change it: another binding, a mutating
    method, a call of the class's own methods. A list-valued option used as L itself (`args.layers`) counts
    when the class never assigns it. Any other form leaves the markers unbound: the layer's width unknown."""
    found: _Loops = {}
    for block in _blocks(fn.body):  # outer loops first: a call in nested pair loops takes the innermost's
        for index, statement in enumerate(block):
            if not isinstance(statement, ast.For):
                continue
            read = _pair_loop(statement)
            if read is None:
                continue
            listed, mark = read
            chain = _chain(listed, block[:index], statement, cls, me, holders, params, module_ints)
            for node in _own_walk(statement.body):
                if isinstance(node, ast.Call):
                    found[id(node)] = (mark, chain)
    return found


def _blocks(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """The statement lists of a function body, outer ones first, not entering nested functions or classes."""
    yield body
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(statement, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner)
        for handler in getattr(statement, "handlers", ()):
            yield from _blocks(handler.body)


def _own_walk(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of the statements, not entering nested functions, classes or lambdas."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in children(node)
                     if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))


def _int_constant(node: ast.AST, value: int) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == value


def _len_of(node: ast.AST) -> Optional[ast.expr]:
    """`len(L)`: L."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
            and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
        return node.args[0]
    return None


def _sliced(node: ast.AST, lower: Optional[int], upper: Optional[int]) -> Optional[ast.expr]:
    """`L[lower:upper]` (no step): L."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is None):
        return None
    bounds = []
    for bound, wanted in ((node.slice.lower, lower), (node.slice.upper, upper)):
        if wanted is None:
            bounds.append(bound is None)
        else:
            bounds.append(bound is not None and (_int_constant(bound, wanted) or (
                wanted < 0 and isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub)
                and _int_constant(bound.operand, -wanted))))
    return node.value if all(bounds) else None


def _offset(node: ast.AST, index: str) -> Optional[int]:
    """`i` -> 0, `i + 1` / `1 + i` -> 1, `i - 1` -> -1 for the loop index `i`; None for anything else."""
    if isinstance(node, ast.Name) and node.id == index:
        return 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = node.left, node.right
        if isinstance(left, ast.Name) and left.id == index and isinstance(right, ast.Constant) \
                and type(right.value) is int:
            return right.value if isinstance(node.op, ast.Add) else -right.value
        if isinstance(node.op, ast.Add) and isinstance(right, ast.Name) and right.id == index \
                and isinstance(left, ast.Constant) and type(left.value) is int:
            return left.value
    return None


def _bound_in(body: list[ast.stmt]) -> set[str]:
    """The names a loop body binds (assignments, loop targets, `with ... as`, walrus, imports)."""
    names: set[str] = set()
    for node in _own_walk(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _pair_loop(loop: ast.For) -> Optional[tuple[ast.expr, Mark]]:
    """The list a loop walks in consecutive pairs, and how its body names a pair's two entries."""
    target, walked = loop.target, loop.iter
    if not (isinstance(walked, ast.Call) and isinstance(walked.func, ast.Name)) or walked.keywords \
            or any(isinstance(a, ast.Starred) for a in walked.args):
        return None
    kind, args = walked.func.id, walked.args
    listed: Optional[ast.expr] = None
    index: Optional[str] = None
    offsets = (0, 1)
    names: dict[str, str] = {}  # loop names that are a pair's entries
    if kind == "range" and isinstance(target, ast.Name):
        index = target.id
        last = args[-1] if args else None
        if len(args) == 1 or (len(args) == 2 and _int_constant(args[0], 0)):
            if isinstance(last, ast.BinOp) and isinstance(last.op, ast.Sub) and _int_constant(last.right, 1):
                listed = _len_of(last.left)
        elif len(args) == 2 and _int_constant(args[0], 1) and last is not None:
            listed, offsets = _len_of(last), (-1, 0)
    elif kind == "enumerate" and len(args) == 1 and isinstance(target, ast.Tuple) and len(target.elts) == 2 \
            and all(isinstance(e, ast.Name) for e in target.elts):
        index = target.elts[0].id  # type: ignore[attr-defined]
        names[target.elts[1].id] = PAIR_FIRST  # type: ignore[attr-defined]
        listed = _sliced(args[0], None, -1)
    elif kind == "zip" and len(args) == 2 and isinstance(target, ast.Tuple) and len(target.elts) == 2 \
            and all(isinstance(e, ast.Name) for e in target.elts):
        second = _sliced(args[1], 1, None)
        first = _sliced(args[0], None, -1) or args[0]
        if second is not None and ast.unparse(first) == ast.unparse(second):
            listed = second
            names = {target.elts[0].id: PAIR_FIRST, target.elts[1].id: PAIR_SECOND}  # type: ignore[attr-defined]
    loop_names = set(names) | ({index} if index else set())
    if listed is None or _bound_in(loop.body) & loop_names:
        return None
    spelled = ast.unparse(listed)

    def mark(node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return names.get(node.id)
        if index is not None and isinstance(node, ast.Subscript) and ast.unparse(node.value) == spelled:
            offset = _offset(node.slice, index)
            return PAIR_FIRST if offset == offsets[0] else PAIR_SECOND if offset == offsets[1] else None
        return None

    return listed, mark


def _changes(nodes: Iterable[ast.AST], spelled: str, me: Optional[str]) -> bool:
    """Whether these nodes may change the list spelled so (or what holds it): a binding of it or of an
    attribute on the way to it, an item stored, a mutating method, and (given `me`) a call of one of the
    class's own methods, which may rewrite it."""
    for sub in nodes:
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            written = ast.unparse(sub.value if isinstance(sub, ast.Subscript) else sub)
            if written == spelled or spelled.startswith(written + "."):
                return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if sub.func.attr in _MUTATORS and ast.unparse(sub.func.value) == spelled:
                return True
            if me is not None and isinstance(sub.func.value, ast.Name) and sub.func.value.id == me:
                return True  # `self.build()`
    return False


def _chain(listed: ast.expr, before: list[ast.stmt], loop: ast.For, cls: ast.ClassDef, me: str,
           holders: frozenset[str], params: frozenset[str], module_ints: dict[str, int]) -> Optional[tuple[str, ...]]:
    """The parts of the list a pair loop walks (Layer.chain), or None when they are not read."""
    if not isinstance(listed, (ast.Name, ast.Attribute)):
        return _list_parts(listed, me, holders, params, module_ints)
    spelled = ast.unparse(listed)
    if _changes(_own_walk(loop.body), spelled, me):
        return None
    for statement in reversed(before):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and ast.unparse(statement.targets[0]) == spelled:
            return _list_parts(statement.value, me, holders, params, module_ints)
        if _keeps_argument(statement, me, holders) and statement.value.id in params:  # type: ignore[attr-defined]
            continue  # `self.args = args`: what makes `self.args.layers` the option
        if _changes(_own_walk([statement]), spelled, me):
            return None
    option = _option_list(listed, me, holders)
    if option is None:
        return None
    init = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    kept = {id(n.targets[0]) for n in _own_walk(init[0].body if init else [])  # type: ignore[attr-defined]
            if isinstance(n, ast.stmt) and _keeps_argument(n, me, holders)}
    if _changes((n for n in walk(cls) if id(n) not in kept), spelled, None):
        return None  # the class assigns it somewhere: its entries are not the option's
    return (option,)


def _keeps_argument(statement: ast.stmt, me: str, holders: frozenset[str]) -> bool:
    """`self.args = args`: `__init__` keeping an argument (class_layers' `handed`)."""
    return isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
        and isinstance(statement.value, ast.Name) and isinstance(statement.targets[0], ast.Attribute) \
        and statement.targets[0].attr in holders and ast.unparse(statement.targets[0].value) == me


def _option_list(node: ast.expr, me: str, holders: frozenset[str]) -> Optional[str]:
    """`args.layers`, `self.args.layers` (`self.args` kept from an `__init__` argument): LIST + `@layers`, the
    entries of the option or configuration field of that name (resolved later, analysis/model_widths.py)."""
    if not isinstance(node, ast.Attribute):
        return None
    holder = node.value
    if isinstance(holder, ast.Name) and holder.id != me:
        return f"{LIST}@{node.attr}"
    if isinstance(holder, ast.Attribute) and holder.attr in holders and isinstance(holder.value, ast.Name) \
            and holder.value.id == me:
        return f"{LIST}@{node.attr}"
    return None


def _list_parts(value: ast.expr, me: str, holders: frozenset[str], params: frozenset[str],
                module_ints: dict[str, int]) -> Optional[tuple[str, ...]]:
    """A list as chain parts: a literal's entries as width tokens (`[self.in_dim]`, `[64, n_classes]`), a
    list-valued option as one LIST part, a sum of those in order; None for anything else."""
    if isinstance(value, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in value.elts):
            return None
        return tuple(width_token(e, params, module_ints) for e in value.elts)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left = _list_parts(value.left, me, holders, params, module_ints)
        right = _list_parts(value.right, me, holders, params, module_ints)
        return None if left is None or right is None else left + right
    option = _option_list(value, me, holders)
    return None if option is None else (option,)


def _marked(layer: Layer) -> bool:
    """A layer built from a pair's entries."""
    tokens = [*layer.dims, *(token for _, token in layer.keywords)]
    return any(PAIR_FIRST in t or PAIR_SECOND in t for t in tokens)


def _filled_with_layers(fn: FunctionNode, me: str, reads: Callable[[ast.Call], bool]) -> frozenset[str]:
    """The lists (`layers`, `self.layers`) the function assigns and fills only with layers its own calls build
    (`reads`: a call read as a layer, or a torch.nn module other than a container): a splat of one
    (`ListModule(*self.layers)`) hands on nothing the class's reading has not seen. Assigned: a literal of
    such calls, or a call that takes the list itself as a splat; filled: `append`/`insert` of such a call,
    `extend` with a literal of them. Any other binding or change of it leaves it out."""
    def built(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and reads(node)

    def literal(node: ast.AST) -> bool:
        return isinstance(node, (ast.List, ast.Tuple)) and all(built(e) for e in node.elts)

    assigned: set[str] = set()
    spoiled: set[str] = set()
    nodes = list(_own_walk(fn.body))
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                spelled = ast.unparse(target)
                wraps = isinstance(node.value, ast.Call) and any(
                    isinstance(a, ast.Starred) and ast.unparse(a.value) == spelled for a in node.value.args)
                if len(node.targets) == 1 and (literal(node.value) or wraps):
                    assigned.add(spelled)
                elif isinstance(target, (ast.Name, ast.Attribute)):
                    spoiled.add(spelled)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            spelled = ast.unparse(node.func.value)
            given = node.args[-1] if node.args and not node.keywords else None
            fine = (node.func.attr in ("append", "insert") and given is not None and built(given)) or (
                node.func.attr == "extend" and given is not None and literal(given))
            if not fine:
                spoiled.add(spelled)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) or (
                isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Del)):
            target = node.target if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else node
            spoiled.add(ast.unparse(target))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            spoiled.add(ast.unparse(node.value))
        elif isinstance(node, ast.For):
            spoiled.update(ast.unparse(n) for n in walk(node.target) if isinstance(n, (ast.Name, ast.Attribute)))
    return frozenset(assigned - spoiled)


def _is_input_call(node: ast.AST, me: str, qualify: Qualify) -> bool:
    """A method call on a local object other than the module itself (`data.metadata()`, `cfg.get("k")`), not
    on an imported module (`models.resnet50()` builds a layer)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr[:1].islower() \
        and isinstance(node.func.value, ast.Name) and node.func.value.id != me and not qualify(node.func)


def _layer(call: ast.Call, qualify: Qualify, params: frozenset[str], local_classes: frozenset[str],
           imported: dict[str, str], module_ints: dict[str, int], mark: Optional[Mark] = None,
           own_lists: frozenset[str] = frozenset()) -> Optional[Layer]:
    """The layer a call builds. `mark`: the pair markers of the loop around it; `own_lists`: the lists
    (`layers`, `self.layers`) the function fills only with what its own calls build."""
    func = call.func

    def token(node: Optional[ast.AST]) -> str:
        return width_token(node, params, module_ints, mark)

    def module(name: str) -> Layer:
        if any(k.arg is None for k in call.keywords):
            return Layer(OPAQUE, name)
        positional: list[str] = []
        for argument in call.args:
            if isinstance(argument, ast.Starred):
                if ast.unparse(argument.value) not in own_lists:
                    return Layer(OPAQUE, name)
                # `ListModule(*self.layers)`: modules read where they are built; the parameters from here on unknown
                positional.append(REST)
                break
            positional.append(token(argument))
        return Layer(MODULE, name, tuple(positional),
                     tuple((k.arg, token(k.value)) for k in call.keywords if k.arg))

    qualified = qualify(func)
    if quantum_simulator(qualified):
        return Layer(DIMS, min(qualified), (NO_WIDTH,))  # a circuit of complex gates: nothing autocast lowers
    for name in sorted(qualified):
        if name.startswith("torch.nn."):
            def argument(position: int, keyword: str) -> Optional[str]:
                given = _argument(call, position, keyword)
                return None if given is None else token(given)

            found = torch_layer(name.rsplit(".", 1)[-1], argument)
            if found is not None:
                return found
    if isinstance(func, ast.Name) and func.id in imported and func.id[:1].isupper() \
            and not any(q.startswith(("torch.", "torch_geometric.", "dgl.", "ogb.")) for q in qualified):
        return module(imported[func.id])  # a class from another module: the project may define it
    for name in sorted(qualified):
        if name.startswith("torch.nn."):
            last = name.rsplit(".", 1)[-1]
            if last == "Parameter" and call.args and isinstance(call.args[0], ast.Call):
                inner = call.args[0]
                while isinstance(inner.func, ast.Attribute) and inner.func.attr in _SAME_SHAPE \
                        and isinstance(inner.func.value, ast.Call):
                    inner = inner.func.value  # `torch.FloatTensor(a, b).cuda()`: the factory's shape
                if any(q.rsplit(".", 1)[-1] in _FACTORIES for q in qualify(inner.func)):
                    shape = [a for a in inner.args if not isinstance(a, ast.Starred)]
                    if len(shape) == 1 and not any(isinstance(a, ast.Starred) for a in inner.args):
                        return None  # a bias or a scale: one dimension, no matmul
                    return Layer(DIMS, "Parameter", tuple(token(a) for a in shape) or (UNKNOWN,))
                return Layer(OPAQUE, "Parameter")
            if last[:1].isupper() and last not in ("Sequential", "ModuleList", "ModuleDict", "ParameterList",
                                                   "ParameterDict"):
                return None  # activations, dropout, norms, pooling, reshapes: no matmul width of their own
            return None
        if name.startswith(_GRAPH_PACKAGES):
            def graph_argument(position: int, keyword: str) -> Optional[str]:
                given = _argument(call, position, keyword)
                if isinstance(given, (ast.Call, ast.Lambda)):
                    return None  # GINConv(nn=Sequential(...)): a module, whose layers are read by themselves
                return None if given is None else token(given)

            if name.rsplit(".", 1)[-1] == "MLP" and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)):
                return mlp_layer([token(e) for e in call.args[0].elts])
            graph = graph_layer(name.rsplit(".", 1)[-1], graph_argument)
            if graph is None or isinstance(graph, Layer):
                return graph
        if name.startswith(("torch.", "math.", "numpy.", "copy.", "functools.", "itertools.", "collections.")):
            return None  # tensors, numbers, helpers: not modules
        return Layer(OPAQUE, name)  # a library's model or layer
    if isinstance(func, ast.Name):
        if func.id in local_classes:
            return module(func.id)
        if func.id in _NO_WIDTH or func.id in params:
            return Layer(OPAQUE, func.id) if func.id in params else None
        return Layer(OPAQUE, func.id)  # a function or class the file does not define here
    if isinstance(func, ast.Attribute) and not qualified:
        if isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            return None  # super().__init__(): the base class's own layers are not read here
        if func.attr in _SAME_SHAPE and isinstance(func.value, ast.Call):
            return None  # `torch.FloatTensor(a, b).cuda()`, `Block(d).to(device)`: the call moved is read by itself
        if func.attr in ("append", "extend", "add_module", "register_buffer", "register_parameter", "view",
                         "reshape", "size", "item", "format", "items", "keys", "values", "get", "pop", "update",
                         "apply", "to", "float", "fill_", "zero_", "normal_", "uniform_", "data", "copy_", "t"):
            return None  # list building, buffers and in-place init: the layers themselves are read elsewhere
        return Layer(OPAQUE, func.attr)
    return None


# layers that are one matmul per row: a convnet's head may hold them
HEAD_LAYERS = frozenset({"Linear", "LazyLinear"})
# layers that do their work in matmuls: a model that repeats them is not a convnet with a head
_MATMUL_LAYERS = frozenset({"Bilinear", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention",
                            "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer", "Parameter"})
# calls and functions that multiply matrices in a forward pass (attention, bilinear scores)
_MATMUL_CALLS = frozenset({"matmul", "bmm", "mm", "einsum", "baddbmm", "addmm", "linear", "bilinear",
                           "scaled_dot_product_attention", "multi_head_attention_forward"})


def multiplies_matrices(cls: ast.ClassDef) -> bool:
    """The class's methods multiply matrices themselves (`q @ k.T`, `torch.bmm`, `F.linear`, SDPA)."""
    for node in walk(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _MATMUL_CALLS:
                return True
    return False


def _convolves(layers: tuple[Layer, ...]) -> bool:
    return any(layer.kind == DIMS and layer.name.startswith(("Conv", "ConvTranspose")) for layer in layers)


def linear_only(layers: Optional[tuple[Layer, ...]]) -> bool:
    """Layers that are Linear layers and nothing else with weights (a classifier or projection head)."""
    return bool(layers) and all(layer.kind == DIMS and layer.name in HEAD_LAYERS for layer in layers or ())


def convnet_classes(classes: dict[str, tuple[ast.ClassDef, Optional[tuple[Layer, ...]]]]) -> frozenset[str]:
    """The module classes of one file that are convnets whose Linear layers are only a head.

    A class qualifies when the file's classes convolve, it multiplies no matrices itself beyond Linear
    layers, every class it builds is one of the file's, and every other module class of the file is either
    a block without matmuls (convolutions, norms, activations; built through a helper or a `block`
    parameter as ResNets do) or a Linear-only head the class builds itself. A transformer's blocks (Linear
    layers or attention in a class the model repeats) make every class of the file fail."""
    if not any(_convolves(layers or ()) for _, layers in classes.values()):
        return frozenset()
    matmul = {name for name, (node, layers) in classes.items() if multiplies_matrices(node) or any(
        layer.kind == DIMS and layer.name in _MATMUL_LAYERS for layer in layers or ())}
    linear = {name for name, (_, layers) in classes.items()
              if any(layer.kind == DIMS and layer.name in HEAD_LAYERS for layer in layers or ())}
    out: set[str] = set()
    for name, (_, layers) in classes.items():
        if layers is None or name in matmul:
            continue
        built = {layer.name for layer in layers if layer.kind == MODULE}
        if not built <= set(classes):
            continue  # builds a class of another module: not read here
        if any(layer.kind == OPAQUE and "." in layer.name or quantum_simulator((layer.name,)) for layer in layers):
            continue  # a library's model or layer inside: its matmuls are unknown
        heads = {b for b in built if linear_only(classes[b][1]) and b not in matmul}
        others = set(classes) - {name} - heads
        if any(o in matmul or o in linear for o in others):
            continue
        out.add(name)
    return frozenset(out)


# ------------------------------------------------------------------------------------------------
# parameter tensors a module builds (ClassFacts.tensors, for GPU201's few-tensor models)
# ------------------------------------------------------------------------------------------------

# torch.nn layers and how many parameter tensors each holds by default (weight and bias; a norm's affine pair)
_LAYER_TENSORS: dict[str, int] = {
    "Parameter": 1, "Embedding": 1, "EmbeddingBag": 1, "Linear": 2, "LazyLinear": 2, "Bilinear": 2, "PReLU": 1,
    "LayerNorm": 2, "BatchNorm1d": 2, "BatchNorm2d": 2, "BatchNorm3d": 2, "GroupNorm": 2, "RMSNorm": 1,
}
# layers that lose their bias with `bias=False`
_BIASED = frozenset({"Linear", "LazyLinear", "Bilinear"})
# torch.nn modules without parameters (losses, named `...Loss`, too)
_WEIGHTLESS = frozenset({
    "ReLU", "ReLU6", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "SELU", "CELU", "GLU", "Softmax",
    "LogSoftmax", "Softmin", "Softplus", "Softsign", "Mish", "Hardswish", "Hardsigmoid", "Hardtanh", "LogSigmoid",
    "Tanhshrink", "Threshold", "Identity", "Flatten", "Unflatten", "Upsample", "PixelShuffle", "PixelUnshuffle",
    "CosineSimilarity", "PairwiseDistance",
})
_WEIGHTED_LOSSES = frozenset({"AdaptiveLogSoftmaxWithLoss"})  # named like a loss, but it holds Linear layers
_WEIGHTLESS_SUFFIXES = ("Loss", "Pool1d", "Pool2d", "Pool3d", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d")
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_PARAMETER_CONTAINERS = frozenset({"ParameterDict", "ParameterList"})
# torch calls that hand back a module or an object that may hold one
_TORCH_LOADERS = ("torch.load", "torch.hub.", "torch.jit.", "torch.compile", "torch.nn.utils.", "torch.export.",
                  "torch.fx.", "torch.package.")
# methods of a module that register a parameter or a submodule under a computed name
_REGISTERS = frozenset({"add_module", "register_module", "register_parameter", "set_submodule", "__setattr__"})
# methods that put a module into a container held by the module (`self.blocks.append(block)`)
_CONTAINER_ADDS = frozenset({"append", "extend", "insert", "update", "setdefault", "__setitem__"})
# what only a module answers: an attribute used so holds a module, not a tensor
_MODULE_API = frozenset({"parameters", "named_parameters", "children", "named_children", "modules",
                         "named_modules", "forward", "state_dict", "load_state_dict", "zero_grad"})
_NO_LOOP = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
            ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _torch_nn(qualified: set[str]) -> Optional[str]:
    """The class name of a torch.nn module a call builds (`Linear`), None for anything else."""
    for name in sorted(qualified):
        if name.startswith("torch.nn.") and not name.startswith(("torch.nn.functional.", "torch.nn.init.",
                                                                  "torch.nn.utils.")):
            # the first class named: `torch.nn.modules.linear.Linear`, `torch.nn.Embedding.from_pretrained`
            found = next((part for part in name.split(".")[2:] if part[:1].isupper()), None)
            if found is not None:
                return found
    return None


def _weightless_layer(layer: str) -> bool:
    """A torch.nn class (by its name, `CrossEntropyLoss`) that holds no parameter: an activation, a reshape, a
    loss, pooling, dropout. A layer of known tensors is not (`AdaptiveLogSoftmaxWithLoss` ends in "Loss")."""
    return layer not in _LAYER_TENSORS and layer not in _WEIGHTED_LOSSES and (
        layer in _WEIGHTLESS or layer.endswith(_WEIGHTLESS_SUFFIXES))


def weightless_class(node: ast.ClassDef) -> bool:
    """A class whose body is only methods (a `forward` among them, no `__init__`): nothing can hold a weight.
    A placeholder (`pass`, class attributes) is not known to be weightless. (facts.py gives such a class over
    nn.Module no layers; `weightless_module` then reads it as a module without parameters.)"""
    methods = [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rest = [n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))]
    return "forward" in methods and "__init__" not in methods and not rest


class ModuleShape(Protocol):
    """What `weightless_module` reads of a project class (facts.ClassFacts, which imports this module)."""

    @property
    def weightless(self) -> bool: ...


def weightless_module(qualified: Iterable[str], project_class: Optional[ModuleShape] = None) -> bool:
    """A call of one of these qualified names builds a module without parameters: a torch.nn one
    (`torch.nn.CrossEntropyLoss`, `torch.nn.Dropout`, `torch.nn.ReLU`), or, given its facts, a project class
    over nn.Module alone that builds no layer and no parameter (only a `forward`: a decoder's dot product).
    `next(m.parameters())` raises StopIteration on such a module, so nothing can take a device from its
    weights. The one place gpulint knows which modules hold no weights (parameter_tensors counts the torch.nn
    ones as 0; the mixed-precision fix never takes its device from one, rewrites/amp_device.py)."""
    layer = _torch_nn(set(qualified))
    if layer is not None:
        return _weightless_layer(layer)
    return project_class is not None and project_class.weightless


def _first_arg(fn: FunctionNode) -> Optional[str]:
    positional = fn.args.posonlyargs + fn.args.args
    return positional[0].arg if positional else None


def parameter_tensors(cls: ast.ClassDef, qualify: Qualify, local_classes: frozenset[str],
                      imported: dict[str, str]) -> Optional[int]:
    """The parameter tensors an nn.Module class's own code visibly builds (ClassFacts.tensors), not counting
    the project classes it builds (its MODULE layers, counted where they are defined); None when any of it
    cannot be read.

    Read: `__init__` and the helper methods it calls (each once), in straight-line code: no loop, no
    comprehension, no nested function or lambda that could build a layer many times (a `for m in
    self.modules()` that builds none, weight initialisation, is fine). Layers added to a container attribute
    built right there (`self.head.add_module("fc", nn.Linear(...))`) count as built. Counted: `nn.Parameter`,
    the literal entries of an `nn.ParameterDict`/`ParameterList`, and torch.nn layers of known tensors
    (`_LAYER_TENSORS`); free: weightless modules, losses, containers of literal layers, torch's tensor
    functions. A call whose result may be a module the class holds (an unknown function whose value becomes
    an attribute the class calls, an element of a container, a function handed `self`), a registration under
    a computed name, a torch.nn layer of unknown tensors, or a layer built outside `__init__` makes it None."""
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if init is None or _first_arg(init) is None:
        return None
    total = 0
    read: list[FunctionNode] = []
    pending: list[FunctionNode] = [init]
    called: set[str] = {"__init__"}
    guarded: set[str] = set()  # attributes bound to something not read as a layer: the class must not call them
    while pending:
        fn = pending.pop()
        read.append(fn)
        me = _first_arg(fn)
        if me is None or any(isinstance(n, _NO_LOOP) and not _initialises_own_modules(n, me, qualify, local_classes,
                                                                                      imported)
                             for s in fn.body for n in fast_walk(s)):  # (any order)
            return None
        nodes, parents = walk_with_parents(fn)
        for call in _calls(fn):
            func = call.func
            if isinstance(func, ast.Name) and func.id == "setattr":
                return None
            if any(isinstance(a, ast.Name) and a.id == me for a in [*call.args, *(k.value for k in call.keywords)]) \
                    and not (isinstance(func, ast.Name) and func.id in ("super", "isinstance", "getattr", "hasattr")):
                return None  # `build(self, cfg)`: a function that may add layers to the module
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
                if func.attr in _REGISTERS:
                    return None
                if func.attr in methods:
                    if func.attr in called:
                        return None  # a helper run twice builds its layers twice
                    called.add(func.attr)
                    pending.append(methods[func.attr])
                    if not _harmless(call, parents, me, qualify, local_classes, imported, guarded):
                        return None
                continue
            if isinstance(func, ast.Attribute) and func.attr in ("add_module", "append") and _on_me(func.value, me) \
                    and _adds_a_built_layer(call):
                continue  # `self.head.add_module("fc", nn.Linear(...))`: the layer's call is counted by itself
            if isinstance(func, ast.Attribute) and func.attr in _CONTAINER_ADDS and _on_me(func.value, me):
                return None  # `self.blocks.append(...)`
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
                    and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
                continue  # super().__init__(): the base is nn.Module itself (checked by the caller)
            kind = _call_kind(call, qualify, local_classes, imported)
            if kind is None:
                return None
            if isinstance(kind, int):
                total += kind
            elif kind == _UNKNOWN and not _harmless(call, parents, me, qualify, local_classes, imported, guarded):
                return None
        for node in nodes:
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and _on_me(node.value, me) and not _plain_container(methods, node.value.attr):  # type: ignore
                return None  # `self.layers["a"] = ...`: a container filled by key
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _on_me(node, me):
                parent = parents.get(id(node))
                if not (isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is not None
                        and (not isinstance(parent, ast.Assign) or parent.targets == [node])
                        and (_builds_layer(parent.value, qualify, local_classes, imported)
                             or _optimizer_object(parent.value, qualify))):
                    guarded.add(node.attr)
    for fn in methods.values():
        me = _first_arg(fn)
        if any(fn is r for r in read) or me is None:
            continue
        for node in all_nodes(fn):  # kept: the loop below reads every method again
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                    and _builds_layer(node.value, qualify, local_classes, imported) and any(
                        _on_me(t, me) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                return None  # a layer built outside `__init__` (lazily, in forward): not read
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _on_me(node, me):
                guarded.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    (node.func.attr in _CONTAINER_ADDS and _on_me(node.func.value, me))
                    or (node.func.attr in _REGISTERS and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == me)):
                return None  # a layer added to the module outside `__init__`
    for fn in methods.values():
        me = _first_arg(fn)
        if me is None:
            continue
        for node in all_nodes(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in guarded and _on_me(func, me):
                return None  # `self.backbone(x)`: an attribute bound to something unread, used as a module
            if isinstance(func, ast.Attribute) and func.attr in _MODULE_API and isinstance(func.value, ast.Attribute) \
                    and func.value.attr in guarded and _on_me(func.value, me):
                return None
    return total


_UNKNOWN, _PART = "unknown", "part"
_OPTIMIZER_OBJECTS = ("torch.optim.", "torch.amp.grad_scaler.", "torch.amp.GradScaler", "torch.cuda.amp.GradScaler")


def inline_tensors(call: ast.Call, qualify: Qualify) -> Optional[int]:
    """The parameter tensors of a torch.nn module written inline where a model is bound (`nn.Linear(2048, n)`,
    `nn.Sequential(nn.Linear(d, k), nn.Softmax(dim=-1))`), counted as `parameter_tensors` counts them: a layer
    of known tensors, a weightless module, a container whose arguments are such calls (literally, or in one
    list or tuple literal); None for anything else (a project class, a name, a splat, a layer of unknown
    tensors)."""
    kind = _call_kind(call, qualify, frozenset(), {})
    if not isinstance(kind, int) or _torch_nn(qualify(call.func)) is None:
        return None
    if _torch_nn(qualify(call.func)) not in _CONTAINERS:
        return kind if _torch_nn(qualify(call.func)) not in _PARAMETER_CONTAINERS else None
    total = 0
    for given in [*call.args, *(k.value for k in call.keywords)]:
        elements = list(given.elts) if isinstance(given, (ast.List, ast.Tuple)) else [given]
        for element in elements:
            inner = inline_tensors(element, qualify) if isinstance(element, ast.Call) else None
            if inner is None:
                return None
            total += inner
    return total


def _plain_display(value: Optional[ast.expr]) -> bool:
    """A Python list, tuple or dict written out (`[]`, `{}`, `[None] * (n + 1)`): a container nn.Module does
    not look into, whatever it is later filled with."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return _plain_display(value.left) or _plain_display(value.right)
    return isinstance(value, (ast.List, ast.Tuple, ast.Dict))


def _plain_container(methods: dict[str, FunctionNode], attr: str) -> bool:
    """Every binding of `self.<attr>` in the class's methods is a plain Python container written out
    (`self.E_u_list = [None] * (l + 1)`): filling it by index (`self.E_u_list[0] = self.E_u_0`) registers
    nothing, so it builds no parameter (a layer stored there is not one of the module's either)."""
    found = False
    for fn in methods.values():
        me = _first_arg(fn)
        for node in all_nodes(fn):
            if not (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.ctx, (ast.Store, ast.Del))
                    and isinstance(node.value, ast.Name)):
                continue
            if me is None or node.value.id != me:
                return False
            bound = next((s for s in all_nodes(fn) if isinstance(s, (ast.Assign, ast.AnnAssign))
                          and (s.targets if isinstance(s, ast.Assign) else [s.target]) == [node]), None)
            if bound is None or not _plain_display(bound.value):
                return False
            found = True
    return found


def _on_me(node: ast.AST, me: str) -> bool:
    """`self.name`."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me


# what `for m in self.modules():` may iterate: the module's own parts, none of them new
_OWN_PARTS = frozenset({"modules", "children", "parameters", "named_modules", "named_children", "named_parameters"})


def _initialises_own_modules(loop: ast.AST, me: str, qualify: Qualify, local_classes: frozenset[str],
                             imported: dict[str, str]) -> bool:
    """`for m in self.modules(): ...` whose body builds no layer (weight initialisation, CMC's `initilize`): it
    runs once per part the module already holds and adds none, so it counts no tensor twice."""
    if not isinstance(loop, ast.For) or loop.orelse:
        return False
    parts = loop.iter
    if not (isinstance(parts, ast.Call) and isinstance(parts.func, ast.Attribute) and parts.func.attr in _OWN_PARTS
            and isinstance(parts.func.value, ast.Name) and parts.func.value.id == me):
        return False
    for node in walk(loop):
        if node is not loop and isinstance(node, _NO_LOOP):
            return False
        if isinstance(node, ast.Call) and node is not parts:
            kind = _call_kind(node, qualify, local_classes, imported)
            if kind is None or kind == _PART or (isinstance(kind, int) and kind > 0):
                return False
    return True


def _adds_a_built_layer(call: ast.Call) -> bool:
    """`.add_module("name", Layer(...))` or `.append(Layer(...))`: a layer built right there, under a literal name."""
    if call.keywords:
        return False
    if isinstance(call.func, ast.Attribute) and call.func.attr == "add_module":
        return len(call.args) == 2 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str) \
            and isinstance(call.args[1], ast.Call)
    return len(call.args) == 1 and isinstance(call.args[0], ast.Call)


def _call_kind(call: ast.Call, qualify: Qualify, local_classes: frozenset[str],
               imported: dict[str, str]) -> Union[int, str, None]:
    """The tensors a call builds (an int), _PART for a project class (counted where it is defined), _UNKNOWN
    for a call that builds no layer torch names (a function of the project, a method, a tensor function of
    unknown origin), None for a layer whose tensors are not known."""
    func = call.func
    qualified = qualify(func)
    layer = _torch_nn(qualified)
    if layer is not None:
        if layer in _LAYER_TENSORS:
            tensors = _LAYER_TENSORS[layer]
            bias = _argument(call, -1, "bias")
            if layer in _BIASED and isinstance(bias, ast.Constant) and bias.value is False:
                tensors -= 1
            return tensors
        if _weightless_layer(layer):
            return 0
        if layer in _CONTAINERS:
            # its layers are calls read by themselves; a name, a splat or a computed list may hold anything
            for given in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(given, (ast.List, ast.Tuple)):
                    elements = list(given.elts)
                elif isinstance(given, ast.Dict) and None not in given.keys:
                    elements = list(given.values)
                else:
                    elements = [given]
                if not all(isinstance(e, ast.Call) for e in elements):
                    return None
            return 0
        if layer in _PARAMETER_CONTAINERS:
            if call.keywords or len(call.args) > 1:
                return None
            if not call.args:
                return 0
            given = call.args[0]
            if isinstance(given, ast.Dict) and None not in given.keys:
                entries = list(given.values)
            elif isinstance(given, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in given.elts):
                entries = list(given.elts)
            else:
                return None
            # an `nn.Parameter(...)` entry is counted as a call of its own; anything else becomes one
            return sum(0 if isinstance(e, ast.Call) and _torch_nn(qualify(e.func)) == "Parameter" else 1
                       for e in entries)
        return None  # a convolution, a recurrent or attention layer, a transformer: tensors not counted here
    if any(q.startswith(_TORCH_LOADERS) or q == "copy.deepcopy" for q in qualified):
        return None  # a module loaded, compiled, wrapped or copied: its tensors are another's
    if any(q.startswith(("torch.", "math.", "numpy.")) for q in qualified):
        return 0  # tensors and numbers
    if any(q.startswith(_GRAPH_PACKAGES) for q in qualified):
        return None  # a graph library's layer: tensors not counted here
    if isinstance(func, ast.Name) and (func.id in local_classes or (
            func.id in imported and func.id[:1].isupper())):
        return _PART  # read where it is defined (ClassFacts.layers holds it as a MODULE layer)
    if isinstance(func, ast.Name) and func.id in _NO_WIDTH:
        return 0
    return _UNKNOWN


def _optimizer_object(value: ast.expr, qualify: Qualify) -> bool:
    """`torch.optim.Adam(self.parameters())`, a scheduler, a GradScaler: an object the class may call
    (`self.optimizer.zero_grad()`) that holds no layer (swa_utils' AveragedModel, a module, excepted)."""
    return isinstance(value, ast.Call) and any(
        q.startswith(_OPTIMIZER_OBJECTS) and ".swa_utils." not in q for q in qualify(value.func))


def _builds_layer(value: ast.expr, qualify: Qualify, local_classes: frozenset[str], imported: dict[str, str]) -> bool:
    """A value that is a layer read here (a torch.nn layer or a project class, moved: `nn.Linear(...).cuda()`)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and isinstance(value.func.value, ast.Call) \
            and value.func.attr in _SAME_SHAPE:
        value = value.func.value
    if isinstance(value, ast.IfExp):
        return all(_builds_layer(v, qualify, local_classes, imported)
                   or (isinstance(v, ast.Constant) and v.value is None) for v in (value.body, value.orelse))
    if not isinstance(value, ast.Call):
        return False
    kind = _call_kind(value, qualify, local_classes, imported)
    return kind == _PART or (isinstance(kind, int) and _torch_nn(qualify(value.func)) is not None)


def _harmless(call: ast.Call, parents: dict[int, ast.AST], me: str, qualify: Qualify, local_classes: frozenset[str],
              imported: dict[str, str], guarded: set[str]) -> bool:
    """A call whose result cannot become a module the class holds unseen: it is given to a call that makes a
    tensor or a layer of it (`nn.Parameter(init(torch.empty(n, d)))`, `nn.Linear(size(), d)`), to a project
    class (read where it is defined) or to another harmless call; or it is the whole value (through method
    calls on it) of a local name, of an attribute (which the class must then never call: `guarded`), of a
    bare expression, of a helper's `return`, or of a `raise`."""
    node: ast.AST = call
    while True:
        parent = parents.get(id(node))
        if parent is None:
            return False
        if isinstance(parent, ast.Call) and node is not parent.func:
            kind = _call_kind(parent, qualify, local_classes, imported)
            func = parent.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
                return func.attr not in _REGISTERS  # `self.register_buffer("adj", build(...))`
            if kind is None:
                return False
            if kind == _UNKNOWN:
                return _harmless(parent, parents, me, qualify, local_classes, imported, guarded)
            name = _torch_nn(qualify(func))
            return name not in _CONTAINERS  # a tensor function, a counted layer, a project class
        if isinstance(parent, (ast.Attribute, ast.Call, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.keyword,
                               ast.Starred, ast.List, ast.Tuple, ast.Dict)):
            node = parent
            continue
        if isinstance(parent, (ast.Expr, ast.Return, ast.Raise)):  # (an exception raised is held by no one)
            return True
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    continue
                if _on_me(target, me):
                    guarded.add(target.attr)  # type: ignore[attr-defined]
                    continue
                return False
            return True
        return False
