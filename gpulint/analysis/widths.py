"""How wide the model a training step trains can be: GPU001's impact floor.

Tensor cores speed up matrix multiplications whose dimensions are large; a model whose every
layer is narrow (a 2 -> 32 -> 1 regression, a 16-unit graph network on Cora, a 64-wide toy
transformer) is launch-bound, and mixed precision buys it nothing. The width of a layer is the
smallest of its sizes (a `Linear(1433, 16)` multiplies through a 16-wide matrix); the model's
width is the largest layer width. It is known only when every layer is: an unknown width is
never taken for a small one.

`layers_width` (analysis/model_widths.py) evaluates the plain data of project/layers.py;
`trained_model_width` here finds the model a step trains (through its optimizer's
`model.parameters()`) and the values its constructor is given, on the LibCST tree, for GPU001.
analysis/model_widths.py reads the same on `ast` for GPU401 (a twin until GPU001 moves to `ast`).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.model_widths import Attribute, Lookup, class_width, layers_width
from gpulint.analysis.training import TrainingFacts, TrainingStep
from gpulint.core.arguments import positional_args
from gpulint.core.values import single_value
from gpulint.core.walk import walk
from gpulint.project.facts import ClassFacts
from gpulint.project.layers import DIMS, PRODUCT, UNKNOWN, Layer, graph_layer, mlp_layer, torch_layer

# ---------------------------------------------------------------------------------------------
# the model a training step trains, on the LibCST tree

def trained_model_width(facts: TrainingFacts, step: TrainingStep) -> Optional[int]:
    """The width of the model(s) the step's optimizer updates; None when any of them is unknown."""
    models: list[cst.BaseExpression] = []
    for optimizer_step in step.steps:
        optimizer = _value(facts, optimizer_step.optimizer)
        if not isinstance(optimizer, cst.Call):
            return None
        params = positional_args(optimizer, ignore_starred=True)
        argument = params[0] if params else next(
            (a.value for a in optimizer.args if a.keyword is not None and a.keyword.value == "params"), None)
        if argument is None:
            return None
        found = _parameters_of(argument)
        if not found:
            return None
        models.extend(found)
    if not models:
        return None
    widest = 0
    for model in models:
        width = _model_width(facts, model)
        if width is None:
            return None
        widest = max(widest, width)
    return widest


def _branch_values(facts: TrainingFacts, name: cst.Name) -> list[cst.BaseExpression]:
    """Every value the name is assigned (on several branches), when each is a plain assignment."""
    owner = facts.ctx.names.binding_scope(name)
    if owner is None:
        return []
    targets = owner.bindings.get(name.value, [])
    values = owner.values.get(name.value, [])
    if not values or len(values) > 8 or any(t is not None for t in targets) or any(v is None for v in values):
        return []
    return [v for v in values if v is not None and not facts.contains(v, name)]


def _unpacked_value(facts: TrainingFacts, name: cst.Name) -> Optional[cst.BaseExpression]:
    """`model, data = Net().to(device), data.to(device)`: the element a tuple assignment gives the name.
    Moves of the name itself (`data, model = data.to(device), model.to(device)` after `model = HAN(...)`)
    keep the model, so the one binding left is its value; any other binding makes it unknown."""
    owner = facts.ctx.names.binding_scope(name)
    if owner is None:
        return None
    scope = owner.node
    values: list[cst.BaseExpression] = []

    class _Assignments(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            value = node.value
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name.value:
                    values.append(value)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                        and len(target.target.elements) == len(value.elements):
                    for left, right in zip(target.target.elements, value.elements):
                        if isinstance(left.value, cst.Name) and left.value.value == name.value:
                            values.append(right.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

    walk(scope, _Assignments())
    if len(values) != len(owner.bindings.get(name.value, [])):
        return None  # bound some other way too (a loop, a with, an augmented assignment)
    kept = [v for v in values if not _moves_itself(v, name.value)]
    return kept[0] if len(kept) == 1 else None


def _moves_itself(value: cst.BaseExpression, name: str) -> bool:
    """`model.to(device)`, `model.cuda()`: the same model, moved."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES:
        value = value.func.value
    return isinstance(value, cst.Name) and value.value == name


def _value(facts: TrainingFacts, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if isinstance(expr, cst.Name):
        return facts.value_at(expr)
    return expr


def _parameters_of(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`model.parameters()`, `list(model.parameters())`, `chain(a.parameters(), b.parameters())`: the models."""
    found: list[cst.BaseExpression] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
                found.append(func.value)

    walk(expr, _Find())
    return found


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
NO_WIDTH = "0"
# layers without a matmul width of their own, when written inside `nn.Sequential(...)`
_NO_WIDTH_LAYERS = frozenset({
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "Softmax", "LogSoftmax", "Mish", "Hardswish",
    "Identity", "Flatten", "Unflatten", "Dropout", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "Softplus", "PReLU", "Upsample", "PixelShuffle",
})


def _model_width(facts: TrainingFacts, model: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    ctx = facts.ctx
    if depth > 8:
        return None
    if isinstance(model, cst.Attribute):
        while isinstance(model, cst.Attribute):  # `model.conv1.parameters()`: a part is no wider than the model
            model = model.value
        return _model_width(facts, model, depth + 1) if isinstance(model, cst.Name) else None
    if isinstance(model, cst.Name):
        value = facts.value_at(model) or _unpacked_value(facts, model)
        if value is not None:
            return _model_width(facts, value, depth + 1)
        widths = [_model_width(facts, v, depth + 1) for v in _branch_values(facts, model)]
        if not widths or None in widths:
            return None
        return max(w for w in widths if w is not None)  # `if args.variational: model = VGAE(...) else: ...`
    if not isinstance(model, cst.Call):
        return None
    func = model.func
    if isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
        return _model_width(facts, func.value, depth + 1)  # `Net(...).to(device)`
    qualified = ctx.qualname(func) or ""
    attribute = _attribute_values(facts)
    if qualified in _WRAPPERS or qualified.rsplit(".", 1)[-1] in ("DistributedDataParallel", "DataParallel",
                                                                   "FullyShardedDataParallel"):
        wrapped = next((a.value for a in model.args if a.keyword is None and not a.star), None)
        return _model_width(facts, wrapped, depth + 1) if wrapped is not None else None  # DDP(model)
    if qualified.startswith("torch.nn."):
        last = qualified.rsplit(".", 1)[-1]
        if last == "Sequential":
            layers: list[Layer] = []
            for arg in model.args:
                if arg.star:
                    return None
                inner = _inline_layer(facts, arg.value)
                if inner is None:
                    return None
                layers.append(inner)
            return layers_width(tuple(layers), _lookup(facts), {}, attribute)
        layer = _inline_layer(facts, model)
        if layer is None or layer.dims == (NO_WIDTH,):
            return None  # a torch.nn class that is not one layer of known width: not read
        return layers_width((layer,), _lookup(facts), {}, attribute)
    if qualified.startswith(("torch_geometric.", "dgl.")):
        library = _graph_model(facts, model, qualified)
        return None if library is None else layers_width((library,), _lookup(facts), {}, attribute)
    spelled = qualified or (func.value if isinstance(func, cst.Name) else None)
    if spelled is None:
        return None
    found = _lookup(facts)(spelled)
    if found is None or found.layers is None:
        return None
    positional = tuple(_token(facts, a.value) for a in model.args if a.keyword is None and not a.star)
    if any(a.star for a in model.args):
        return None
    keywords = {a.keyword.value: _token(facts, a.value) for a in model.args if a.keyword is not None}
    return class_width(found, _lookup(facts), positional, keywords, {}, attribute)


def _graph_model(facts: TrainingFacts, call: cst.Call, qualified: str) -> Optional[Layer]:
    """A graph library's model built in the training file (`GCN(in, 16, 2, out)`), as one layer."""
    def argument(position: int, keyword: str) -> Optional[str]:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return _token(facts, arg.value)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        return _token(facts, positional[position]) if 0 <= position < len(positional) else None

    last = qualified.rsplit(".", 1)[-1]
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    if last == "MLP" and isinstance(first, (cst.List, cst.Tuple)):
        return mlp_layer([_token(facts, e.value) for e in first.elements])
    found = graph_layer(last, argument)
    return found if isinstance(found, Layer) else None


def _inline_layer(facts: TrainingFacts, expr: cst.BaseExpression) -> Optional[Layer]:
    """A layer written inside `nn.Sequential(...)` in the training file."""
    if not isinstance(expr, cst.Call):
        return None
    qualified = facts.ctx.qualname(expr.func) or ""
    if not qualified.startswith("torch.nn."):
        return None
    last = qualified.rsplit(".", 1)[-1]

    def argument(position: int, keyword: str) -> Optional[str]:
        for arg in expr.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return _token(facts, arg.value)
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        return _token(facts, positional[position]) if position < len(positional) else None

    found = torch_layer(last, argument)
    if found is not None:
        return found
    if last in _NO_WIDTH_LAYERS or last.endswith(("Norm", "Norm1d", "Norm2d", "Norm3d", "Pool1d", "Pool2d", "Pool3d",
                                                    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d")):
        return Layer(DIMS, last, (NO_WIDTH,))  # activations, dropout, norms, pooling: no width of their own
    return None


def _token(facts: TrainingFacts, expr: cst.BaseExpression) -> str:
    """A width token for an argument of the constructor the training file calls."""
    ctx = facts.ctx
    if isinstance(expr, cst.Integer):
        return str(int(expr.value, 0))
    if isinstance(expr, cst.Tuple) and expr.elements and all(isinstance(e.value, cst.Integer) for e in expr.elements):
        return str(max(int(e.value.value, 0) for e in expr.elements))  # type: ignore[attr-defined]  # (5, 5)
    if isinstance(expr, cst.Name):
        value = single_value(expr, ctx.names) or _unpacked_value(facts, expr)
        if isinstance(value, cst.Integer):
            return str(int(value.value, 0))
        return UNKNOWN
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self":
        return f"@{expr.attr.value}"  # `args.hidden`, `config.n_embd`
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        left, right = _token(facts, expr.left), _token(facts, expr.right)
        return UNKNOWN if UNKNOWN in (left, right) else f"{left}{PRODUCT}{right}"
    return UNKNOWN


def _lookup(facts: TrainingFacts) -> Lookup:
    project = facts.ctx.project

    def lookup(spelled: str) -> Optional[ClassFacts]:
        return project.class_facts(spelled)

    return lookup


def _attribute_values(facts: TrainingFacts) -> Attribute:
    """`args.hidden` -> the argparse default the file declares; `config.n_embd` -> the config value the
    project passes or its dataclass default."""
    project = facts.ctx.project

    def value(name: str) -> Optional[int]:
        default = project.own.argparse_defaults.get(name)
        if type(default) is int:
            return default
        return project.dataclass_int(name)

    return value
