"""The widths of a model's layers, read from its class with CPython's `ast` (for GPU001's impact floor).

Mixed precision pays off when the matrix multiplications are wide enough for tensor cores; a
2 -> 32 -> 1 regression or a 16-unit graph network is launch-bound and gains nothing. This module
reduces an `nn.Module` class to the layers its `__init__` (and the methods `__init__` calls) build,
each as plain data: a layer with widths (`nn.Linear(in, out)`, `nn.Conv2d(in, out, k)`, an
`nn.Parameter(torch.empty(in, out))`), another class of the project built with arguments, or
something that cannot be sized (a library model, a module handed in). Widths are tokens, resolved
later against the call site (analysis/model_widths.py): an integer, an `__init__` parameter, a
configuration attribute (`args.hidden`, `config.n_embd`), a module-level constant, or unknown.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

# layer kinds
DIMS = "dims"  # a layer whose matmul width is the smallest of `dims`
MODULE = "module"  # another class built with `dims` as positional and `keywords` as keyword arguments
OPAQUE = "opaque"  # a module whose width cannot be read (a library model, one handed in, built by a helper)

UNKNOWN = "?"
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
# torch.nn.Transformer's d_model defaults to 512 when not given
_TORCH_DEFAULTS: dict[str, tuple[str, int]] = {"Transformer": ("d_model", 512)}
# graph layers (PyG, DGL): Conv(in_channels, out_channels, ...)
_GRAPH_PACKAGES = ("torch_geometric.nn", "dgl.nn", "ogb.graphproppred")
# tensor factories whose positional arguments are a parameter's shape
_FACTORIES = frozenset({"empty", "zeros", "ones", "randn", "rand", "Tensor", "FloatTensor"})
# calls that build nothing with weights (or only containers whose children are read anyway)
_NO_WIDTH = frozenset({
    "super", "len", "int", "float", "range", "list", "tuple", "dict", "zip", "enumerate", "max", "min", "sum", "abs",
    "round", "isinstance", "getattr", "setattr", "hasattr", "print", "sorted", "reversed", "map", "filter", "str",
    "bool", "divmod", "pow",
})


@dataclass(frozen=True)
class Layer:
    kind: str  # DIMS, MODULE or OPAQUE
    name: str  # the layer's class as spelled in the file
    dims: tuple[str, ...] = ()  # width tokens (DIMS), or the positional argument tokens (MODULE)
    keywords: tuple[tuple[str, str], ...] = ()  # MODULE: keyword argument tokens


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
        return Layer(DIMS, last, dims)
    if last in _TORCH_DEFAULTS:
        keyword, default = _TORCH_DEFAULTS[last]
        return Layer(DIMS, last, (argument(0, keyword) or str(default),))
    return None


def _calls(fn: FunctionNode) -> Iterator[ast.Call]:
    """The calls in a function's own code (not in nested functions or classes), in source order."""
    found: list[ast.Call] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)
    yield from sorted(found, key=lambda c: (c.lineno, c.col_offset))


PRODUCT = "|"  # `hidden * heads` -> "=hidden|=heads": a product of tokens


def width_token(node: Optional[ast.AST], params: frozenset[str], module_ints: dict[str, int]) -> str:
    """An integer, `=param`, `@attribute`, a product of those, or unknown."""
    if node is None:
        return UNKNOWN
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = width_token(node.left, params, module_ints), width_token(node.right, params, module_ints)
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
    layers: list[Layer] = []
    pending: list[tuple[FunctionNode, frozenset[str]]] = [(init, params)]
    seen = {"__init__"}
    while pending:
        fn, known = pending.pop()
        calls = list(_calls(fn))
        inputs = {id(arg) for outer in calls for arg in [*outer.args, *(k.value for k in outer.keywords)]
                  if _is_input_call(arg, me, qualify)}
        for call in calls:
            if id(call) in inputs:
                continue  # HANConv(..., metadata=data.metadata()): a method's result handed in, not a layer
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
                if func.attr in methods and func.attr not in seen and len(seen) < 8:
                    seen.add(func.attr)
                    pending.append((methods[func.attr], frozenset()))  # a helper's own parameters are unknown
                continue
            layer = _layer(call, qualify, known, local_classes, imported, module_ints)
            if layer is not None:
                layers.append(layer)
    # a module handed in (`self.backbone = backbone`) and called in forward: its width is the caller's
    handed = {t.attr for n in ast.walk(init) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
              and n.value.id in params for t in n.targets
              if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me}
    for name in ("forward", "__call__"):
        method = methods.get(name)
        if method is None:
            continue
        for call in _calls(method):
            if isinstance(call.func, ast.Attribute) and call.func.attr in handed and \
                    isinstance(call.func.value, ast.Name) and call.func.value.id == me:
                layers.append(Layer(OPAQUE, call.func.attr))
    return tuple(layers), tuple(names), defaults


def _is_input_call(node: ast.AST, me: str, qualify: Qualify) -> bool:
    """A method call on a local object other than the module itself (`data.metadata()`, `cfg.get("k")`), not
    on an imported module (`models.resnet50()` builds a layer)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr[:1].islower() \
        and isinstance(node.func.value, ast.Name) and node.func.value.id != me and not qualify(node.func)


def _layer(call: ast.Call, qualify: Qualify, params: frozenset[str], local_classes: frozenset[str],
           imported: dict[str, str], module_ints: dict[str, int]) -> Optional[Layer]:
    func = call.func

    def token(node: Optional[ast.AST]) -> str:
        return width_token(node, params, module_ints)

    def module(name: str) -> Layer:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return Layer(OPAQUE, name)
        positional = tuple(token(a) for a in call.args)
        return Layer(MODULE, name, positional, tuple((k.arg, token(k.value)) for k in call.keywords if k.arg))

    qualified = qualify(func)
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
    for node in ast.walk(cls):
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
        if any(layer.kind == OPAQUE and "." in layer.name for layer in layers):
            continue  # a library's model or layer inside: its matmuls are unknown
        heads = {b for b in built if linear_only(classes[b][1]) and b not in matmul}
        others = set(classes) - {name} - heads
        if any(o in matmul or o in linear for o in others):
            continue
        out.add(name)
    return frozenset(out)
