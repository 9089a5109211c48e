"""How wide the model a training step trains can be, on CPython's `ast`: GPU001's and GPU401's impact floor.

Tensor cores speed up matrix multiplications whose dimensions are large; a model whose every layer is narrow
is launch-bound, and neither mixed precision nor TF32 buys it anything. The width of a layer is the smallest
of its sizes; the model's width is the largest layer width. It is known only when every layer is: an unknown
width is never taken for a small one.

`layers_width` evaluates the plain data of project/layers.py; `trained_model_width` finds the model a step
trains (through its optimizer's `model.parameters()`) and the values its constructor is given.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Mapping, Optional, Union

from gpulint.analysis.amp_steps import AmpStep
from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.ast_values import self_attribute_value, single_value, value_at
from gpulint.analysis.holders import held_values
from gpulint.analysis.steps import step_facts
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import ClassFacts
from gpulint.project.layers import (
    DIMS,
    HANDED,
    LIST,
    MODULE,
    NO_WIDTH,
    PAIR_FIRST,
    PAIR_SECOND,
    PRODUCT,
    RECURRENT_GATES,
    REST,
    UNKNOWN,
    Layer,
    graph_layer,
    mlp_layer,
    quantum_simulator,
    torch_layer,
)

MAX_DEPTH = 6
HANDED_KEY = "<module>"  # bindings: HANDED_KEY + a parameter -> the width of the module a caller passes for it
Lookup = Callable[[str], Optional[ClassFacts]]  # a class by the name a file spells it
# `args.hidden` / `config.n_embd` -> its integer, `args.layers` -> its list of integers, when known
Attribute = Callable[[str], Union[int, tuple[int, ...], None]]


def resolve_token(token: str, bindings: Mapping[str, Optional[int]], attribute: Attribute) -> Optional[int]:
    """The integer a width token stands for: a literal, a bound `__init__` parameter, a config attribute."""
    if token == UNKNOWN:
        return None
    if PRODUCT in token:
        product = 1
        for factor in token.split(PRODUCT):
            value = resolve_token(factor, bindings, attribute)
            if value is None:
                return None
            product *= value
        return product
    if token.startswith("="):
        return bindings.get(token[1:])
    if token.startswith("@"):
        given = attribute(token[1:])
        return given if isinstance(given, int) else None  # a list-valued option is no width
    try:
        return int(token)
    except ValueError:
        return None


def layers_width(layers: tuple[Layer, ...], lookup: Lookup, bindings: Mapping[str, Optional[int]],
                 attribute: Attribute, depth: int = 0, kinds: Optional[set[str]] = None) -> Optional[int]:
    """The largest matmul width these layers can have; None when some layer's width is unknown. `kinds`
    collects the names of the layers read (`Linear`, `Conv2d`, ...)."""
    if depth > MAX_DEPTH:
        return None
    widest = 0
    for layer in layers:
        if layer.chain:
            width = chain_width(layer, lookup, bindings, attribute, depth, kinds)
            if width is None:
                return None
            widest = max(widest, width)
        elif layer.kind == DIMS and layer.name in RECURRENT_GATES:
            if kinds is not None:
                kinds.add(layer.name)
            width = recurrent_width(layer, bindings, attribute)
            if width is None:
                return None
            widest = max(widest, width)
        elif layer.kind == DIMS:
            if kinds is not None and layer.dims != (NO_WIDTH,):
                kinds.add(layer.name)  # activations, dropout and pooling multiply nothing
            sizes = [t for t in layer.dims if not t.startswith("*")]
            known = [v for v in (resolve_token(t, bindings, attribute) for t in sizes) if v is not None]
            if not known:
                return None
            width = min(known)
            for factor in (t[1:] for t in layer.dims if t.startswith("*")):  # a convolution's kernel size
                value = resolve_token(factor, bindings, attribute)
                if value is None:
                    return None
                width *= value
            widest = max(widest, width)
        elif layer.kind == MODULE:
            found = lookup(layer.name)
            if found is None:
                return None  # a class gpulint cannot read: a library's, or one defined elsewhere
            if not found.module:
                continue  # a plain class (a config object): no layers
            inner = class_width(found, lookup, layer.dims, dict(layer.keywords), bindings, attribute, depth + 1,
                                kinds)
            if inner is None:
                return None
            widest = max(widest, inner)
        elif layer.kind == HANDED:
            # `Diffusion(model=MLP(...))`: the module kept from that parameter, as wide as the one passed
            width = bindings.get(HANDED_KEY + layer.dims[0]) if layer.dims else None
            if width is None:
                return None
            widest = max(widest, width)
        else:
            return None
    return widest


def recurrent_width(layer: Layer, bindings: Mapping[str, Optional[int]], attribute: Attribute) -> Optional[int]:
    """The width of a recurrent layer: the wider of its two matmuls, each as wide as its smaller side. The
    recurrent one is hidden x gates*hidden, `hidden` wide whatever the input; the input one input x
    gates*hidden, so a narrow input bounds only that one; a stacked or bidirectional layer (`num_layers`,
    `bidirectional` passed, not 1 or False) feeds its later layers hidden or twice hidden. Unknown without
    `hidden`; an unknown input counts as gates*hidden wide."""
    hidden = resolve_token(layer.dims[1], bindings, attribute) if len(layer.dims) > 1 else None
    if hidden is None:
        return None
    gates = RECURRENT_GATES[layer.name] * hidden
    given = resolve_token(layer.dims[0], bindings, attribute)
    width = max(hidden, min(given, gates) if given is not None else gates)
    if any(token not in (("num_layers", "1"), ("bidirectional", "False")) for token in layer.keywords):
        width = max(width, min(2 * hidden, gates))  # the next layer reads both directions' hidden states
    return width


def chain_entries(chain: tuple[str, ...], bindings: Mapping[str, Optional[int]],
                  attribute: Attribute) -> Optional[list[Optional[int]]]:
    """The entries of the list a pair loop walks (Layer.chain), each an integer or None where it is not known;
    None when a list-valued part is not known (its length decides which entries pair up)."""
    entries: list[Optional[int]] = []
    for part in chain:
        if part.startswith(LIST):
            value = attribute(part[len(LIST) + 1:]) if part[len(LIST):].startswith("@") else None
            if not isinstance(value, tuple):
                return None
            entries.extend(value)
        else:
            entries.append(resolve_token(part, bindings, attribute))
    return entries


def chain_width(layer: Layer, lookup: Lookup, bindings: Mapping[str, Optional[int]], attribute: Attribute,
                depth: int = 0, kinds: Optional[set[str]] = None) -> Optional[int]:
    """The width of a layer a loop builds once per consecutive pair of a list: the widest of its builds.

    Each build is read as any layer is, with the pair's two entries for its markers: a DIMS layer is as wide as
    the smallest size known, so a pair with one entry unknown is bounded by the other, and one with both
    unknown (and no other size) is unknown. For `[in] + args.layers + [out]` with `args.layers` known and not
    empty, every consecutive pair holds at least one entry of `args.layers` (only `in` and `out` side by side
    would hold none, and they are apart unless the option is empty), so the width is at most the largest
    entry of the option, whatever `in` and `out` are; an empty option pairs `in` with `out`, unknown. A list
    of fewer than two entries builds nothing."""
    entries = chain_entries(layer.chain, bindings, attribute)
    if entries is None:
        return None
    once = replace(layer, chain=())
    widest = 0
    first, second = PAIR_FIRST[1:], PAIR_SECOND[1:]
    for left, right in zip(entries, entries[1:]):
        width = layers_width((once,), lookup, {**bindings, first: left, second: right}, attribute, depth, kinds)
        if width is None:
            return None
        widest = max(widest, width)
    return widest


def class_width(found: ClassFacts, lookup: Lookup, positional: tuple[str, ...], keywords: Mapping[str, str],
                outer: Mapping[str, Optional[int]], attribute: Attribute, depth: int = 0,
                kinds: Optional[set[str]] = None, modules: Mapping[str, int] = {}) -> Optional[int]:
    """The width of a model class built with these argument tokens (resolved in the caller's bindings);
    `modules`: the widths of the modules the caller passes for its HANDED parameters, by parameter."""
    if found.layers is None:
        return None
    bindings: dict[str, Optional[int]] = dict(found.init_defaults)
    bindings.update((HANDED_KEY + name, width) for name, width in modules.items())
    for index, (name, token) in enumerate(zip(found.init_params, positional)):
        if token == REST:  # `ListModule(*self.layers)`: this parameter and the ones after it are not known
            bindings.update((rest, None) for rest in found.init_params[index:])
            break
        bindings[name] = resolve_token(token, outer, attribute)
    for name, token in keywords.items():
        bindings[name] = resolve_token(token, outer, attribute)
    return layers_width(found.layers, lookup, bindings, attribute, depth, kinds)


# ---------------------------------------------------------------------------------------------
# the model a training step trains, on the `ast` tree

def trained_model_width(ctx: AstContext, step: AmpStep, kinds: Optional[set[str]] = None) -> Optional[int]:
    """The width of the model(s) the step's optimizer updates; None when any of them is unknown. `kinds`
    collects the names of their layers."""
    models: list[ast.expr] = []
    for optimizer_step in step.steps:
        arguments = _optimized_each(ctx, optimizer_step.optimizer)
        if arguments is None:
            return None
        for argument in arguments:
            found = _parameters_of(argument)
            if not found:
                return None
            models.extend(found)
    if not models:
        return None
    widest = 0
    for model in models:
        width = _model_width(ctx, model, kinds=kinds)
        if width is None:
            return None
        widest = max(widest, width)
    return widest


def _optimized_each(ctx: AstContext, optimizer: ast.expr) -> Optional[list[ast.expr]]:
    """What each optimizer a step may step was built over: the one `_optimized` finds, or, for a parameter of a
    module-level function the file only calls (`train(dataflow, model, device, optimizer)` called again with a
    fine-tuning optimizer), the `params` argument of the optimizer each call hands it; None when any is unknown."""
    found = _optimized(ctx, optimizer)
    if found is not None:
        return [found]
    if not isinstance(optimizer, ast.Name) or _value(ctx, optimizer) is not None:
        return None
    passed = passed_values(ctx, optimizer)
    if not passed or len(passed) == 1:
        return None  # one call: `_optimized` read it already
    out: list[ast.expr] = []
    for value in passed:
        argument = _params_argument(_value(ctx, value))
        if argument is None:
            return None
        out.append(argument)
    return out


def _optimized(ctx: AstContext, optimizer: ast.expr) -> Optional[ast.expr]:
    """What the optimizer a step steps was built over: its `params` argument (first, or by keyword)."""
    built = _value(ctx, optimizer)
    if isinstance(optimizer, ast.Attribute) and _on_self(optimizer):
        built = self_attribute_value(ctx, optimizer, skip_none=True)  # `self.optimizer = Adam(...)` in a trainer
    if built is None and isinstance(optimizer, ast.Name):
        passed = passed_value(ctx, optimizer)  # `def train(model, optimizer): ...` called once with both
        built = _value(ctx, passed) if passed is not None else None
    return _params_argument(built)


def _params_argument(built: Optional[ast.expr]) -> Optional[ast.expr]:
    """The `params` argument (first, or by keyword) of an optimizer's constructor call."""
    if not isinstance(built, ast.Call):
        return None
    params = [a for a in built.args if not isinstance(a, ast.Starred)]
    return params[0] if params else next((k.value for k in built.keywords if k.arg == "params"), None)


def optimizes_inputs(ctx: AstContext, step: AmpStep) -> bool:
    """Every optimizer of the step is handed only tensors the file itself makes trainable (an image or a latent
    optimised through a frozen network: style transfer, GAN inversion), none of a model's parameters."""
    if not step.steps:
        return False
    for optimizer_step in step.steps:
        argument = _optimized(ctx, optimizer_step.optimizer)
        if not isinstance(argument, (ast.List, ast.Tuple)) or not argument.elts:
            return False
        for element in argument.elts:
            made = _value(ctx, element) if isinstance(element, ast.Name) else None
            if made is None or not _made_trainable(made):
                return False
    return True


def _made_trainable(value: ast.expr) -> bool:
    """`content.clone().requires_grad_(True)`, `torch.randn(..., requires_grad=True)`: a tensor, not a module's."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
        return not value.args or (isinstance(value.args[0], ast.Constant) and value.args[0].value is True)
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in value.keywords) and not _parameters_of(value)


def passed_value(ctx: AstContext, name: ast.Name) -> Optional[ast.expr]:
    """A parameter of a module-level function the file calls exactly once, by name, and uses no other way:
    the argument that call passes for it (`train(args, loader, model, optimizer)`, the linear probe's step
    taking the `LogisticRegression` built beside the call). None when the parameter is rebound, passed by
    `*args`/`**kwargs` or left to its default, or when the function may be called from elsewhere in the file
    (handed on as a value, called twice)."""
    found = passed_values(ctx, name)
    return found[0] if found is not None and len(found) == 1 else None


def passed_values(ctx: AstContext, name: ast.Name) -> Optional[list[ast.expr]]:
    """A parameter of a module-level function the file only calls, by name: the argument each call passes
    for it (`train(dataset, model, args)` called once per benchmark, each with its own model). None when
    the parameter is rebound, some call passes it by `*args`/`**kwargs` or leaves it to its default, or the
    function is used another way (handed on as a value, so called from where the file does not show)."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return None
    function = owner.node
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.decorator_list \
            or not any(function is s for s in ctx.tree.body) or len(owner.bindings.get(name.id, [])) != 1:
        return None
    arguments = function.args
    ordered = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    if name.id not in ordered and name.id not in {a.arg for a in arguments.kwonlyargs}:
        return None
    module = ctx.names.module_scope
    if len(module.bindings.get(function.name, [])) != 1:
        return None
    uses = [n for n in ctx.named(function.name) if ctx.names.binding_scope(n) is module]
    if not uses:
        return None  # never called by name (so `calls`, below, finds no call either)
    calls = ctx.analysis(step_facts).call_sites(function)  # the file's one index of who calls what
    if not calls or len(uses) != len(calls) or any(all(c.func is not u for c in calls) for u in uses):
        return None
    index = ordered.index(name.id) if name.id in ordered else -1
    values: list[ast.expr] = []
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        keyword = next((k.value for k in call.keywords if k.arg == name.id), None)
        if keyword is None and not 0 <= index < len(call.args):
            return None
        values.append(keyword if keyword is not None else call.args[index])
    return values


def _inside(ctx: AstContext, outer: ast.AST, node: ast.AST) -> bool:
    return any(a is outer for a in ctx.ancestors(node))


def _branch_values(ctx: AstContext, name: ast.Name) -> list[ast.expr]:
    """Every value the name is assigned (on several branches), when each is a plain assignment."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return []
    targets = owner.bindings.get(name.id, [])
    values = owner.values.get(name.id, [])
    if not values or len(values) > 8 or any(t is not None for t in targets) or any(v is None for v in values):
        return []
    return [v for v in values if v is not None and not _inside(ctx, v, name)]


def _unpacked_value(ctx: AstContext, name: ast.Name) -> Optional[ast.expr]:
    """`model, data = Net().to(device), data.to(device)`: the element a tuple assignment gives the name.
    Moves of the name itself keep the model, so the one binding left is its value; any other binding makes it
    unknown."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return None
    values: list[ast.expr] = []
    for node in _own_assignments(ctx, owner.node):
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name.id:
                values.append(node.value)
            elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(node.value.elts):
                for left, right in zip(target.elts, node.value.elts):
                    if isinstance(left, ast.Name) and left.id == name.id:
                        values.append(right.value if isinstance(right, ast.Starred) else right)
    if len(values) != len(owner.bindings.get(name.id, [])):
        return None  # bound some other way too (a loop, a with, an augmented assignment)
    kept = [v for v in values if not _moves_itself(v, name.id)]
    return kept[0] if len(kept) == 1 else None


def _own_assignments(ctx: AstContext, scope: ast.AST) -> list[ast.Assign]:
    """The `=` statements among `_own_nodes(scope)`, in its order, listed once per scope for the file (every
    model name of a training function asks about the same scope)."""
    known = ctx.analysis(_assignments_read)
    found = known.get(scope)
    if found is None:
        found = known[scope] = [n for n in _own_nodes(scope) if isinstance(n, ast.Assign)]
    return found


def _assignments_read(ctx: AstContext) -> dict[ast.AST, list[ast.Assign]]:
    """Filled by `_own_assignments`."""
    return {}


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of `scope` outside the functions defined in it (classes and lambdas are entered)."""
    found: list[ast.AST] = []
    stack = [scope]
    while stack:
        node = stack.pop()
        found.append(node)
        for child in child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.append(child)
    return found


def _moves_itself(value: ast.expr, name: str) -> bool:
    """`model.to(device)`, `model.cuda()` (`self.model.to(device)` for "self.model"): the same model, moved."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
        value = value.func.value
    return isinstance(value, (ast.Name, ast.Attribute)) and ast.unparse(value) == name


def _value(ctx: AstContext, expr: ast.expr) -> Optional[ast.expr]:
    if isinstance(expr, ast.Name):
        return value_at(ctx, expr)
    return expr


def _parameters_of(expr: ast.expr) -> list[ast.expr]:
    """`model.parameters()`, `list(model.parameters())`, `chain(a.parameters(), b.parameters())`: the models."""
    return [n.func.value for n in walk_nodes(expr) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("parameters", "named_parameters")]


_MOVES = frozenset({"to", "cuda", "train", "float", "double", "cpu"})
_WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel", "torch.compile", "torch.jit.script",
    # graph autoencoders around the encoder they are given first: GAE(GCNEncoder(...))
    "torch_geometric.nn.GAE", "torch_geometric.nn.VGAE", "torch_geometric.nn.ARGA", "torch_geometric.nn.ARGVA",
    "torch_geometric.nn.models.GAE", "torch_geometric.nn.models.VGAE",
    # heterogeneous copies of a homogeneous model: to_hetero(GNN(...), metadata)
    "torch_geometric.nn.to_hetero", "torch_geometric.nn.to_hetero_with_bases",
})
# layers without a matmul width of their own, when written inside `nn.Sequential(...)`
_NO_WIDTH_LAYERS = frozenset({
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "Softmax", "LogSoftmax", "Mish", "Hardswish",
    "Identity", "Flatten", "Unflatten", "Dropout", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "Softplus", "PReLU", "Upsample", "PixelShuffle",
})


def _positional(call: ast.Call) -> list[ast.expr]:
    return [a for a in call.args if not isinstance(a, ast.Starred)]


def _starred(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _model_width(ctx: AstContext, model: ast.expr, depth: int = 0, kinds: Optional[set[str]] = None) -> Optional[int]:
    if depth > 8:
        return None
    if isinstance(model, ast.Attribute):
        # `model.conv1.parameters()`: a part is no wider than the model
        while isinstance(model, ast.Attribute) and not _on_self(model):
            model = model.value
        if isinstance(model, ast.Attribute):
            return _held_width(ctx, model, depth, kinds)
        return _model_width(ctx, model, depth + 1, kinds) if isinstance(model, ast.Name) else None
    if isinstance(model, ast.Name):
        value = value_at(ctx, model) or _unpacked_value(ctx, model)
        if value is not None:
            return _model_width(ctx, value, depth + 1, kinds)
        # `def train(model, ...)` called once, or once per model it trains: the widest of what they pass
        passed = passed_values(ctx, model)
        widths = [_model_width(ctx, v, depth + 1, kinds) for v in passed or _branch_values(ctx, model)]
        if not widths or None in widths:
            return None
        return max(w for w in widths if w is not None)  # `if args.variational: model = VGAE(...) else: ...`
    if isinstance(model, ast.IfExp):  # `Conv_Q(...) if is_atari else FC_Q(...)`: the wider of the two
        branches = [_model_width(ctx, v, depth + 1, kinds) for v in (model.body, model.orelse)]
        return None if None in branches else max(w for w in branches if w is not None)
    if not isinstance(model, ast.Call):
        return None
    func = model.func
    if isinstance(func, ast.Attribute) and func.attr in _MOVES:
        return _model_width(ctx, func.value, depth + 1, kinds)  # `Net(...).to(device)`
    qualified = ctx.qualname(func) or ""
    attribute = _attribute_values(ctx)
    if qualified in _WRAPPERS or qualified.rsplit(".", 1)[-1] in ("DistributedDataParallel", "DataParallel",
                                                                   "FullyShardedDataParallel"):
        wrapped = next(iter(_positional(model)), None)
        return _model_width(ctx, wrapped, depth + 1, kinds) if wrapped is not None else None  # DDP(model)
    if qualified.startswith("torch.nn."):
        last = qualified.rsplit(".", 1)[-1]
        if last == "Sequential":
            if _starred(model):
                return None
            layers: list[Layer] = []
            for value in [*model.args, *(k.value for k in model.keywords)]:
                inner = _inline_layer(ctx, value)
                if inner is None:
                    return None
                layers.append(inner)
            return layers_width(tuple(layers), _lookup(ctx), {}, attribute, kinds=kinds)
        layer = _inline_layer(ctx, model)
        if layer is None or layer.dims == (NO_WIDTH,):
            return None  # a torch.nn class that is not one layer of known width: not read
        return layers_width((layer,), _lookup(ctx), {}, attribute, kinds=kinds)
    if quantum_simulator((qualified,)):
        return 0  # `TorchConnector(qnn)`, `qml.qnn.TorchLayer(qnode, shapes)` trained alone: complex gates only
    if qualified.startswith(("torch_geometric.", "dgl.")):
        library = _graph_model(ctx, model, qualified)
        return None if library is None else layers_width((library,), _lookup(ctx), {}, attribute, kinds=kinds)
    spelled = qualified or (func.id if isinstance(func, ast.Name) else None)
    if spelled is None:
        return None
    found = _lookup(ctx)(spelled)
    if found is None or found.layers is None:
        return None
    positional = tuple(_token(ctx, a) for a in _positional(model))
    if _starred(model):
        return None
    keywords = {k.arg: _token(ctx, k.value) for k in model.keywords if k.arg is not None}
    modules = _handed_widths(ctx, model, found, depth, kinds)
    if modules is None:
        return None
    return class_width(found, _lookup(ctx), positional, keywords, {}, attribute, kinds=kinds, modules=modules)


def _handed_widths(ctx: AstContext, call: ast.Call, found: ClassFacts, depth: int,
                   kinds: Optional[set[str]]) -> Optional[dict[str, int]]:
    """The widths of the modules a wrapper's constructor call passes for the parameters it keeps and calls
    (`Diffusion(state_dim, action_dim, model=self.model)`): each read where it is built. None when one is
    unknown or not passed (an unknown width is not a small one)."""
    out: dict[str, int] = {}
    for layer in found.layers or ():
        if layer.kind != HANDED or not layer.dims:
            continue
        param = layer.dims[0]
        given = next((k.value for k in call.keywords if k.arg == param), None)
        if given is None and param in found.init_params:
            index = found.init_params.index(param)
            positional = _positional(call)
            given = positional[index] if index < len(positional) else None
        if given is None:
            return None
        width = _model_width(ctx, given, depth + 1, kinds)
        if width is None:
            return None
        out[param] = width
    return out


def _on_self(expr: ast.Attribute) -> bool:
    return isinstance(expr.value, ast.Name) and expr.value.id == "self"


def _held_width(ctx: AstContext, held: ast.Attribute, depth: int, kinds: Optional[set[str]]) -> Optional[int]:
    """`self.model` in a trainer's method: the widest of the models the class ever assigns it, leaving out the
    moves of itself (`self.model = self.model.to(self.device)`); None when any is unknown or some binding is
    not a plain assignment."""
    values = held_values(ctx, held)
    if not values:
        return None
    spelled = ast.unparse(held)
    built = [v for v in values if not _moves_itself(v, spelled)]
    widths = [_model_width(ctx, v, depth + 1, kinds) for v in built]
    if not widths or None in widths:
        return None
    return max(w for w in widths if w is not None)


def _argument_token(ctx: AstContext, call: ast.Call, position: int, keyword: str) -> Optional[str]:
    for k in call.keywords:
        if k.arg == keyword:
            return _token(ctx, k.value)
    positional = _positional(call)
    return _token(ctx, positional[position]) if 0 <= position < len(positional) else None


def _graph_model(ctx: AstContext, call: ast.Call, qualified: str) -> Optional[Layer]:
    """A graph library's model built in the training file (`GCN(in, 16, 2, out)`), as one layer."""
    last = qualified.rsplit(".", 1)[-1]
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Starred):
        first = first.value
    if last == "MLP" and isinstance(first, (ast.List, ast.Tuple)):
        return mlp_layer([_token(ctx, e.value if isinstance(e, ast.Starred) else e) for e in first.elts])
    found = graph_layer(last, lambda position, keyword: _argument_token(ctx, call, position, keyword))
    return found if isinstance(found, Layer) else None


def _inline_layer(ctx: AstContext, expr: ast.expr) -> Optional[Layer]:
    """A layer written inside `nn.Sequential(...)` in the training file."""
    if not isinstance(expr, ast.Call):
        return None
    qualified = ctx.qualname(expr.func) or ""
    if not qualified.startswith("torch.nn."):
        return None
    last = qualified.rsplit(".", 1)[-1]
    found = torch_layer(last, lambda position, keyword: _argument_token(ctx, expr, position, keyword))
    if found is not None:
        return found
    if last in _NO_WIDTH_LAYERS or last.endswith(("Norm", "Norm1d", "Norm2d", "Norm3d", "Pool1d", "Pool2d", "Pool3d",
                                                    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d")):
        return Layer(DIMS, last, (NO_WIDTH,))  # activations, dropout, norms, pooling: no width of their own
    return None


def _integer(expr: Optional[ast.expr]) -> Optional[int]:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    return None


def _token(ctx: AstContext, expr: ast.expr) -> str:
    """A width token for an argument of the constructor the training file calls."""
    if _integer(expr) is not None:
        return str(_integer(expr))
    integers = [_integer(e) for e in expr.elts] if isinstance(expr, ast.Tuple) else []
    if integers and all(i is not None for i in integers):
        return str(max(i for i in integers if i is not None))  # (5, 5)
    if isinstance(expr, ast.Name):
        value = single_value(expr, ctx.names) or _unpacked_value(ctx, expr)
        found = _integer(value)
        return str(found) if found is not None else UNKNOWN
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id != "self":
        return f"@{expr.attr}"  # `args.hidden`, `config.n_embd`
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        left, right = _token(ctx, expr.left), _token(ctx, expr.right)
        return UNKNOWN if UNKNOWN in (left, right) else f"{left}{PRODUCT}{right}"
    return UNKNOWN


def _lookup(ctx: AstContext) -> Lookup:
    project = ctx.project

    def lookup(spelled: str) -> Optional[ClassFacts]:
        return project.class_facts(spelled)

    return lookup


def _attribute_values(ctx: AstContext) -> Attribute:
    """`args.hidden` -> the argparse default the file declares, or else the files around it agree on (a list
    of integers for `args.layers`, `nargs="+"`); `config.n_embd` -> the config value the project passes or its
    dataclass default."""
    project = ctx.project

    def value(name: str) -> Union[int, tuple[int, ...], None]:
        default = project.argparse_default(name)
        if type(default) is int:
            return default
        if isinstance(default, (list, tuple)) and all(type(v) is int for v in default):
            return tuple(default)
        return project.dataclass_int(name)

    return value
