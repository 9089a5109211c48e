"""Which device type the mixed-precision fix writes: the script's own, spelled as code.

`torch.autocast("cuda")` and `GradScaler("cuda")` hard-coded in a function whose device is a
parameter or is chosen at run time are wrong on a CPU or MPS run: the scaler switches itself off
with a warning while the autocast region runs in float16, unscaled. So the fix uses, in this
order, the device the function moves its tensors to (`device.type`, `torch.device(args.device).type`;
failing a `.to(...)`, the device it hands to a call, `move_to(x, opts.device)`), the model's
(`next(model.parameters()).device.type`), the batch's (`x.device.type`, only where no scaler is
created, since the batch exists only inside the loop: there the device and the model are looked for
again, as seen from the wrapped region, before the batch), and only then a literal: "xpu" in a file
that uses Intel GPUs and never CUDA, else "cuda". A step whose code calls `.cuda()` runs on CUDA
whatever its model says: it gets the literal. The batch is only ever a name the model itself is
called on, never one handed to a helper (`unwrap(batch)`) nor one the step reads as a container
(`batch["x"]`, `batch.items()`): a dict or list from a loader has no `.device`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.analysis.amp_fix import default_device as text_device
from gpulint.analysis.training import TrainingFacts, TrainingStep
from gpulint.core.arguments import positional_args
from gpulint.core.context import FileContext
from gpulint.core.values import self_attribute_value, single_value
from gpulint.project.layers import weightless_module

_DEVICE_TYPES = ("cuda", "cpu", "xpu", "mps")
_DEVICE_FACTORIES = ("torch.device", "torch.accelerator.current_accelerator")
_TEXT_BUILTINS = frozenset({"print", "str", "repr", "format", "int", "len", "isinstance", "getattr", "setattr"})
_MODEL_NAMES = ("model", "net", "module", "network", "encoder", "decoder", "generator", "discriminator")


def device_kind(value: Optional[cst.BaseExpression], ctx: FileContext) -> Optional[str]:
    """"device" for a torch.device, "string" for a device-type string, "index" for a CUDA index, else None."""
    if isinstance(value, cst.Call) and ctx.qualname(value.func) in _DEVICE_FACTORIES:
        return "device"
    if isinstance(value, cst.SimpleString) and str(value.evaluated_value).split(":")[0] in _DEVICE_TYPES:
        return "string" if ":" not in str(value.evaluated_value) else "indexed"
    if isinstance(value, cst.Integer):
        return "index"
    if isinstance(value, cst.IfExp):
        kinds = {device_kind(value.body, ctx), device_kind(value.orelse, ctx)}
        return kinds.pop() if len(kinds) == 1 else ("mixed" if None not in kinds else None)
    return None


def name_kind(name: cst.Name, ctx: FileContext) -> Optional[str]:
    """The kind of every value the name is assigned (`device = torch.device(...)` on two branches)."""
    owner = ctx.names.binding_scope(name)
    if owner is None:
        return None
    values = owner.values.get(name.value, [])
    if not values or any(v is None for v in values):
        return None
    kinds = {device_kind(v, ctx) for v in values}
    if None in kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "mixed"


def visible_at(facts: TrainingFacts, name: cst.Name, anchor: cst.CSTNode) -> bool:
    """Every binding of the name is a plain assignment made before `anchor`, in code `anchor` can see."""
    owner = facts.ctx.names.binding_scope(name)
    if owner is None:
        return False
    values = owner.values.get(name.value, [])
    if not values or any(v is None or not facts.before(v, anchor) for v in values):
        return False
    return owner.node is facts.ctx.module or facts.contains(owner.node, anchor)


def single_visible_at(facts: TrainingFacts, name: cst.Name, anchor: cst.CSTNode) -> bool:
    """The name's one binding is made before `anchor`, in code that `anchor` can see."""
    return single_value(name, facts.ctx.names) is not None and visible_at(facts, name, anchor)


def parameter_visible(facts: TrainingFacts, name: cst.Name, anchor: cst.CSTNode) -> bool:
    """`name` is a parameter of a function that holds `anchor` (never rebound there)."""
    owner = facts.ctx.names.binding_scope(name)
    if owner is None or not isinstance(owner.node, cst.FunctionDef) or not facts.contains(owner.node, anchor):
        return False
    targets = owner.bindings.get(name.value, [])
    values = owner.values.get(name.value, [])
    params = {p.name.value for p in (*owner.node.params.posonly_params, *owner.node.params.params,
                                     *owner.node.params.kwonly_params)}
    return name.value in params and len(targets) == 1 and values == [None]


def _looks_like_device(name: cst.Name) -> bool:
    """`device`, `dev`, `local_rank`, `gpu`: a name that holds a device, never a dtype."""
    lowered = name.value.lower()
    return "dtype" not in lowered and (
        "device" in lowered or lowered in ("dev", "rank", "local_rank", "gpu", "gpu_id"))


def _device_targets(facts: TrainingFacts, scope: cst.CSTNode) -> list[cst.BaseExpression]:
    """What `.to(X)` / `.to(device=X)` move tensors to inside `scope`."""
    found: list[cst.BaseExpression] = []
    for call in facts.calls:
        if not facts.contains(scope, call) or not isinstance(call.func, cst.Attribute) \
                or call.func.attr.value != "to":
            continue
        args = positional_args(call, ignore_starred=True)
        target = args[0] if args else next(
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
        if isinstance(target, (cst.Name, cst.Attribute)):
            found.append(target)
    return found


def constant_type(facts: TrainingFacts, name: cst.Name) -> Optional[str]:
    """The one device type every value of the name spells out (`torch.device("cuda")`, `"cuda:0"`)."""
    owner = facts.ctx.names.binding_scope(name)
    values = owner.values.get(name.value, []) if owner is not None else []
    types: set[str] = set()
    for value in values:
        if isinstance(value, cst.Call) and facts.ctx.qualname(value.func) == "torch.device" and value.args:
            value = value.args[0].value
        if not isinstance(value, cst.SimpleString):
            return None
        types.add(str(value.evaluated_value).split(":")[0])
    return types.pop() if len(types) == 1 else None


def name_device_code(facts: TrainingFacts, name: cst.Name, anchor: cst.CSTNode, torch: str) -> Optional[str]:
    """The device type a name holding a device gives, as code valid at `anchor`; None when it cannot."""
    kind = name_kind(name, facts.ctx)
    if kind is not None and visible_at(facts, name, anchor):
        return {"device": f"{name.value}.type", "string": name.value}.get(kind, f"{torch}.device({name.value}).type")
    if _looks_like_device(name) and (visible_at(facts, name, anchor) or parameter_visible(facts, name, anchor)):
        return f"{torch}.device({name.value}).type"  # a str, an index or a torch.device: all work
    return None


def cuda_device(facts: TrainingFacts, scopes: tuple[cst.CSTNode, ...], code: str) -> bool:
    """The device code found in the scopes names a device that is always CUDA (`torch.device("cuda")`)."""
    for scope in scopes:
        for target in _device_targets(facts, scope):
            if isinstance(target, cst.Name) and code in (target.value, f"{target.value}.type"):
                return constant_type(facts, target) == "cuda"
    return False


def device_code_in(facts: TrainingFacts, scopes: tuple[cst.CSTNode, ...], anchor: cst.CSTNode,
                   torch: str) -> Optional[str]:
    """The device type the scopes move tensors to, as code valid at `anchor`: `device.type`, `device`,
    `torch.device(args.device).type`; None when they move tensors nowhere visible from there."""
    for scope in scopes:
        found: dict[str, str] = {}
        for target in _device_targets(facts, scope):
            code = facts.ctx.code(target)
            if isinstance(target, cst.Name):
                written = name_device_code(facts, target, anchor, torch)
                if written is not None:
                    found[code] = written
            elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and \
                    "device" in target.attr.value.lower() and (
                        parameter_visible(facts, target.value, anchor) or visible_at(facts, target.value, anchor)):
                found[code] = f"{torch}.device({code}).type"  # `args.device`, `self.device`
        if len(found) == 1:
            return next(iter(found.values()))
        if found:
            break
    return None


def _handed_devices(facts: TrainingFacts, scope: cst.CSTNode) -> list[cst.BaseExpression]:
    """The devices `scope` hands to a call other than `.to(...)`: an argument spelled as a device
    (`move_to(x, opts.device)`, `torch.zeros(n, device=device)`), never an index or a rank."""
    found: list[cst.BaseExpression] = []
    for call in facts.calls:
        func = call.func
        if not facts.contains(scope, call) or (isinstance(func, cst.Attribute) and (
                func.attr.value == "to" or isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)))) \
                or (isinstance(func, cst.Name) and func.value in _TEXT_BUILTINS):
            continue  # `"cuda:{}".format(device)`, `print(device)`: text, not a tensor's device
        for arg in call.args:
            value = arg.value
            last = value.value if isinstance(value, cst.Name) else (
                value.attr.value if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) else "")
            if arg.star == "" and "device" in last.lower() and "dtype" not in last.lower():
                found.append(value)
    return found


def handed_device_code(facts: TrainingFacts, scopes: tuple[cst.CSTNode, ...], anchor: cst.CSTNode,
                       torch: str) -> Optional[str]:
    """`torch.device(opts.device).type` for the one device the scopes hand to calls, as code valid at
    `anchor`; None when there is none or more than one."""
    for scope in scopes:
        found: set[str] = set()
        for target in _handed_devices(facts, scope):
            if isinstance(target, cst.Name):
                written = name_device_code(facts, target, anchor, torch)
                if written is not None:
                    found.add(written)
            elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and (
                    parameter_visible(facts, target.value, anchor) or visible_at(facts, target.value, anchor)):
                found.add(f"{torch}.device({facts.ctx.code(target)}).type")
        if len(found) == 1:
            return found.pop()
        if found:
            break
    return None


def _model_like(facts: TrainingFacts, func: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """A module instance visible at `anchor`: a name assigned a class instance (`Net().to(device)`), a
    parameter named like a model, or `self.model`."""
    ctx = facts.ctx
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        value = self_attribute_value(func, ctx.names)
        named = any(word in func.attr.value.lower() for word in _MODEL_NAMES)
        return named and (value is None or _instance(value, ctx)) and parameter_visible(facts, func.value, anchor)
    if not isinstance(func, cst.Name):
        return False
    if parameter_visible(facts, func, anchor):
        return any(word in func.value.lower() for word in _MODEL_NAMES)
    value = single_value(func, ctx.names)
    return value is not None and visible_at(facts, func, anchor) and _instance(value, ctx)


def _instance(value: cst.BaseExpression, ctx: FileContext) -> bool:
    """`Net(...)`, `models.resnet50(...)`, `Net().to(device)`, `DDP(Net(), ...)`: an nn.Module with weights,
    never one without (`nn.CrossEntropyLoss()`, a project class that only defines `forward`:
    project/layers.py `weightless_module`), whose `next(m.parameters())` raises StopIteration."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in ("to", "cuda", "train", "float", "half", "bfloat16") \
            and isinstance(value.func.value, cst.Call):
        value = value.func.value
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    last = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
    qualified = ctx.qualname(func) or ""
    spelled = ctx.code(func)
    if weightless_module((qualified,), ctx.project.class_facts(spelled)):
        return False
    return last[:1].isupper() and not qualified.startswith(("torch.Tensor", "torch.device")) \
        or qualified.startswith("torchvision.models.")


def model_device_code(facts: TrainingFacts, model_calls: list[cst.Call], anchor: cst.CSTNode) -> Optional[str]:
    """`next(model.parameters()).device.type` for the model the step calls, when it is visible at `anchor`."""
    for call in model_calls:
        if _model_like(facts, call.func, anchor):
            return f"next({facts.ctx.code(call.func)}.parameters()).device.type"
    return None


def _forward_call(facts: TrainingFacts, call: cst.Call, anchor: cst.CSTNode) -> bool:
    """The call runs the model: a module visible at `anchor` (`model(x)`, `self.net(x)`) or a callable
    the function is handed (`fn(x)`); never a helper (`baseline.unwrap_batch(batch)`, `move_to(...)`)."""
    func = call.func
    if _model_like(facts, func, anchor):
        return True
    return isinstance(func, cst.Name) and parameter_visible(facts, func, anchor)


_CONTAINER_METHODS = frozenset({"items", "keys", "values", "get", "append"})


def _read_as_container(facts: TrainingFacts, name: cst.Name, scope: cst.CSTNode) -> bool:
    """The code of `scope` reads the name as a dict or a list: `name["x"]`, `name.items()`, `len(name)`
    (asked only of the one name the batch fix would write)."""
    names = facts.ctx.names
    owner = names.binding_scope(name)

    def same(node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and node.value == name.value and names.binding_scope(node) is owner

    for call in facts.calls:
        if not facts.contains(scope, call):
            continue
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CONTAINER_METHODS and same(func.value):
            return True
        if isinstance(func, cst.Name) and func.value == "len" and call.args and same(call.args[0].value):
            return True
    return any(same(node.value) and any(isinstance(element.slice, cst.Index)
                                        and isinstance(element.slice.value, cst.SimpleString)
                                        for element in node.slice)
               for node in _subscripts(scope))


def _subscripts(scope: cst.CSTNode) -> list[cst.Subscript]:
    found: list[cst.Subscript] = []

    class _Collect(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            found.append(node)

    scope.visit(_Collect())
    return found


def batch_device_code(facts: TrainingFacts, model_calls: list[cst.Call], anchor: cst.CSTNode,
                      written: frozenset[str] = frozenset()) -> Optional[str]:
    """`x.device.type` for the first tensor the model is called on (valid inside the step only), skipping
    names in `written`, which the region autocast wraps assigns (`next_state` of `..., next_state, ... =
    replay_buffer.sample()`): `with torch.autocast(...)` is entered before they exist. Only the model's
    own argument counts (module docstring): a helper's may be the loader's dict."""
    for call in model_calls:
        if not _forward_call(facts, call, anchor):
            continue
        args = positional_args(call, ignore_starred=True) or []
        if args and isinstance(args[0], cst.Name) and facts.ctx.names.binding_scope(args[0]) is not None \
                and args[0].value not in written \
                and not _read_as_container(facts, args[0], facts.scope_of(anchor)):
            return f"{args[0].value}.device.type"
    return None


def _calls_cuda(facts: TrainingFacts, scopes: tuple[cst.CSTNode, ...]) -> bool:
    """The step's code moves tensors with `.cuda()`: it runs on CUDA, whatever the model says."""
    return any(isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda"
               and any(facts.contains(scope, call) for scope in scopes) for call in facts.calls)


def default_device(ctx: FileContext) -> str:
    """The device type a file uses when none is visible (analysis/amp_fix.py: read from the text)."""
    return text_device(ctx.text)


def device_type_code(facts: TrainingFacts, step: TrainingStep, anchor: cst.CSTNode, torch: str = "torch",
                     model_calls: Optional[list[cst.Call]] = None, inside_step: bool = False,
                     written: frozenset[str] = frozenset(), region: Optional[cst.CSTNode] = None) -> str:
    """The step's device type as code valid at `anchor` (see the module docstring for the order); inside
    the step (`region`: the first statement autocast wraps, where the code is then written), the device
    and the model are looked for again as seen from there, and never a name of `written` (the names the
    autocast region assigns) is taken."""
    scopes = (step.node, facts.scope_of(step.node))
    inner = region if inside_step and region is not None else anchor
    found = None
    for where in dict.fromkeys((anchor, inner)):
        found = device_code_in(facts, scopes, where, torch) or handed_device_code(facts, scopes, where, torch)
        if found is None and model_calls and not _calls_cuda(facts, scopes):
            found = model_device_code(facts, model_calls, where)
        if found is not None:
            break
    if found is None and model_calls and inside_step and not _calls_cuda(facts, scopes):
        found = batch_device_code(facts, model_calls, inner, written)
    return found if found is not None else facts.ctx.style.string(default_device(facts.ctx))
