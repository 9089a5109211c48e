"""The copies that move a DataLoader's batches to the GPU, so pinning them pays off (GPU101).

`pin_memory=True` alone leaves `.to(device)` synchronous: the step still waits for each copy.
With pinned batches `.to(device, non_blocking=True)` queues the copy and returns, so the host
prepares the next batch while the GPU computes (PyTorch's pin_memory/non_blocking tutorial). The
copies found here are host-to-device moves of the loader's batches inside the loops that iterate
it, in this file: over the loader's name, through `enumerate()`/`tqdm()`-style wrappers, and in a
function of this file the loader is passed to. Never `.cpu()` or `.to("cpu")` (a device-to-host
copy read before a sync is garbage), never a move whose result is read on the host in the same
loop (`.item()`, `.tolist()`, `.numpy()`, `print()`), and never `.to()` on a whole batch a
`collate_fn` built (its own `.to()` may not take `non_blocking`).
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from gpulint.analysis.loaders import kept_parameter
from gpulint.analysis.training import TrainingFacts, training_facts
from gpulint.core.arguments import positional_args
from gpulint.core.context import FileContext
from gpulint.core.pending import Replace
from gpulint.core.rewrite import add_keyword
from gpulint.core.torch_api import SHAPE_METHODS
from gpulint.core.walk import walk
from gpulint.project.loader_flow import DEVICE_WORDS
from gpulint.records import dataclass

# calls that wrap an iterable and hand its items on: `enumerate(loader)`, `tqdm(loader, desc=...)`
_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "track", "progress_bar", "ProgressBar", "Bar"})
_HOST_READS = frozenset({"item", "tolist", "numpy", "cpu"})
_HOST_FUNCTIONS = frozenset({"print", "float", "int", "bool", "str", "repr"})


@dataclass(frozen=True)
class Copies:
    calls: tuple[cst.Call, ...]  # `.to(device)` / `.cuda()` calls that get `non_blocking=True`
    loops: int  # loops over the loader found in this file
    where: tuple[str, ...]  # the functions holding them, for the fix message
    mover: str = ""  # the framework that copies the batches instead: "accelerate", "lightning", ""


def framework_mover(ctx: FileContext, loader: cst.Call) -> str:
    """Who copies the loader's batches when the file does not: Accelerate (`accelerator.prepare(loader)`,
    blocking unless told otherwise), or Lightning / Fabric (`*_dataloader()` hooks,
    `fabric.setup_dataloaders(loader)`), whose transfers already pass non_blocking=True."""
    facts = ctx.analysis(training_facts)
    function = facts.scope_of(loader)
    if isinstance(function, cst.FunctionDef) and function.name.value.endswith("_dataloader") \
            and any(isinstance(a, cst.ClassDef) for a in facts.ancestors(function)):
        return "lightning"
    holder = _holder(facts, loader)
    if holder is None:
        return ""
    for call in facts.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("prepare", "setup_dataloaders") and any(
                _same(facts, arg.value, holder) for arg in call.args):
            return "accelerate" if func.attr.value == "prepare" else "lightning"
    return ""


def batch_copies(ctx: FileContext, loader: cst.Call, custom_collate: bool) -> Copies:
    facts = ctx.analysis(training_facts)
    loops = _loops_over(facts, loader)
    calls: list[cst.Call] = []
    where: list[str] = []
    for loop in loops:
        batch = _names(loop.target)
        found = _copies_in(facts, loop, batch, custom_collate)
        for call in found:
            if all(call is not c for c in calls):
                calls.append(call)
        if found:
            function = facts.scope_of(loop)
            name = f"{function.name.value}()" if isinstance(function, cst.FunctionDef) else "the module"
            if name not in where:
                where.append(name)
    return Copies(tuple(calls), len(loops), tuple(where), "" if calls else framework_mover(ctx, loader))


def copy_edits(ctx: FileContext, copies: Copies) -> list[Replace]:
    """`non_blocking=True` on each copy: one edit per statement, so that copies sharing a line are laid
    out together (`x, y = x.to(device), y.to(device)`)."""
    facts = ctx.analysis(training_facts)
    by_statement: dict[int, tuple[cst.SimpleStatementLine, list[cst.Call]]] = {}
    edits: list[Replace] = []
    for call in copies.calls:
        statement = facts.statement_of(call)
        if isinstance(statement, cst.SimpleStatementLine):
            by_statement.setdefault(id(statement), (statement, []))[1].append(call)
        else:
            edits.append(Replace(call, add_keyword(call, "non_blocking", "True")))
    for line, calls in by_statement.values():
        rewritten = line.visit(_NonBlocking({id(c) for c in calls}))
        assert isinstance(rewritten, cst.SimpleStatementLine)  # only calls change
        edits.append(Replace(line, rewritten))
    return edits


class _NonBlocking(cst.CSTTransformer):
    def __init__(self, calls: set[int]) -> None:
        self.calls = calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if id(original_node) in self.calls:
            return add_keyword(updated_node, "non_blocking", "True")
        return updated_node


def _holder(facts: TrainingFacts, loader: cst.Call) -> Optional[cst.BaseExpression]:
    """The name or `self.x` the loader is assigned to."""
    parent = facts.parent(loader)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Name) or (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                                            and target.value.value == "self"):
            return target
    if isinstance(parent, cst.AnnAssign) and isinstance(parent.target, (cst.Name, cst.Attribute)):
        return parent.target
    return None


def _same(facts: TrainingFacts, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """The same variable: one name binding, or `self.x` in the same class."""
    names = facts.ctx.names
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value and names.binding_scope(a) is names.binding_scope(b) \
            and names.binding_scope(a) is not None
    if isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute) and isinstance(a.value, cst.Name) \
            and isinstance(b.value, cst.Name) and a.value.value == b.value.value == "self":
        return a.attr.value == b.attr.value and _class_of(facts, a) is _class_of(facts, b) is not None
    return False


def _class_of(facts: TrainingFacts, node: cst.CSTNode) -> Optional[cst.ClassDef]:
    return next((a for a in facts.ancestors(node) if isinstance(a, cst.ClassDef)), None)


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(tqdm(loader))` -> `loader`."""
    while isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
        func = expr.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name)
                                                                         else "")
        if name not in _WRAPPERS:
            break
        expr = expr.args[0].value
    return expr


def _loops_over(facts: TrainingFacts, loader: cst.Call) -> list[cst.For]:
    holder = _holder(facts, loader)
    if holder is None:
        return []
    loops: list[cst.For] = []
    for loop in _all_loops(facts):
        source = _unwrapped(loop.iter)
        if isinstance(source, cst.Name):
            source = _with_wrapped(facts, source)
        if _same(facts, source, holder):
            loops.append(loop)
        elif isinstance(source, cst.Name) and isinstance(holder, cst.Name) and _passed_in(facts, source, holder):
            loops.append(loop)
    return loops


def _with_wrapped(facts: TrainingFacts, name: cst.Name) -> cst.BaseExpression:
    """What a name bound once by `with tqdm(loader) as progress_bar:` wraps (analysis/loaders.py's
    `_with_wrapped`); the name itself otherwise."""
    names = facts.ctx.names
    owner = names.binding_scope(name)
    if owner is None or len(owner.bindings.get(name.value, [])) != 1:
        return name
    found: list[cst.BaseExpression] = []

    class _Withs(cst.CSTVisitor):
        def visit_WithItem(self, node: cst.WithItem) -> None:
            bound = node.asname.name if node.asname is not None else None
            if not found and isinstance(bound, cst.Name) and bound.value == name.value \
                    and names.binding_scope(bound) is owner:
                inner = _unwrapped(node.item)
                found.append(inner if inner is not node.item else name)

    walk(facts.ctx.module, _Withs())
    return found[0] if found else name


def _all_loops(facts: TrainingFacts) -> list[cst.For]:
    found: list[cst.For] = []

    class _Loops(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.append(node)

    walk(facts.ctx.module, _Loops())
    return found


_PASS_DEPTH = 3  # analysis/loaders.py's: how many functions deep a loader is followed through parameters


def _passed_in(facts: TrainingFacts, parameter: cst.Name, loader: cst.Name, depth: int = _PASS_DEPTH) -> bool:
    """`parameter` is a parameter of a module-level function that a call in this file passes `loader`
    to (`train(model, train_loader, ...)` -> `def train(model, loader, ...)`), and is never rebound; also
    through a parameter of another such function that hands it on (analysis/loaders.py's `_passed_in`)."""
    names = facts.ctx.names
    owner = names.binding_scope(parameter)
    if owner is None or not isinstance(owner.node, cst.FunctionDef) \
            or not kept_parameter(owner.bindings.get(parameter.value), owner.values.get(parameter.value),
                                  _wraps(parameter.value)):
        return False
    function = owner.node
    params = [*function.params.posonly_params, *function.params.params]
    position = next((i for i, p in enumerate(params) if p.name.value == parameter.value), None)
    calls = [c for c in facts.calls if isinstance(c.func, cst.Name) and c.func.value == function.name.value
             and names.binding_scope(c.func) is names.module_scope]
    if not calls:
        return False
    passes = 0
    for call in calls:
        argument: Optional[cst.BaseExpression] = next(
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == parameter.value), None)
        if argument is None and position is not None:
            positional = [a for a in call.args if a.keyword is None]
            if any(a.star for a in positional[:position + 1]) or len(positional) <= position:
                continue
            argument = positional[position].value
        if argument is not None and (_same(facts, argument, loader) or (
                depth > 1 and isinstance(argument, cst.Name)
                and _passed_in(facts, argument, loader, depth - 1))):
            passes += 1
    return passes > 0


def _wraps(name: str) -> Callable[[cst.BaseExpression], bool]:
    """Whether a value is `name` wrapped for progress (`tqdm(loader)`), for analysis/loaders.py's
    `kept_parameter`."""
    def wraps_itself(value: cst.BaseExpression) -> bool:
        inner = _unwrapped(value)
        return inner is not value and isinstance(inner, cst.Name) and inner.value == name
    return wraps_itself


def _names(target: cst.BaseExpression) -> set[str]:
    """The names a loop target binds: `x, y`, `(i, (x, y))`, `batch`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= _names(element.value)
        return out
    return set()


def _base_name(expr: cst.BaseExpression) -> Optional[str]:
    """`x` for `x`, `x[0]`, `x["image"]`, `x.images`."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _unshaped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`images` for `images.reshape(-1, 784)` (SHAPE_METHODS; analysis/loaders.py `_unshaped` on `ast`)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SHAPE_METHODS:
        expr = expr.func.value
    return expr


def _chain_base(expr: cst.BaseExpression) -> Optional[str]:
    """`x` for `x.sum()`, `x[0].mean()`: the name a chain of calls, attributes and subscripts starts from."""
    while isinstance(expr, (cst.Subscript, cst.Attribute, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _is_device(expr: cst.BaseExpression, ctx: FileContext) -> bool:
    """A device, never a dtype nor the CPU: `device`, `args.device`, `"cuda"`, `0`, `x.device`."""
    if isinstance(expr, cst.SimpleString):
        return str(expr.evaluated_value).split(":")[0] in ("cuda", "xpu")
    if isinstance(expr, cst.Integer):
        return True
    qualified = ctx.qualname(expr) or ""
    if qualified.startswith("torch.") and "device" not in qualified:
        return False  # torch.float16, torch.bfloat16
    if isinstance(expr, cst.Call):
        return qualified == "torch.device" and bool(expr.args) and _is_device(expr.args[0].value, ctx)
    last = expr.attr.value if isinstance(expr, cst.Attribute) else (expr.value if isinstance(expr, cst.Name) else "")
    lowered = last.lower()
    return "dtype" not in lowered and any(word in lowered for word in DEVICE_WORDS)


def _host_to_device(call: cst.Call, ctx: FileContext) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute) or any(a.keyword is not None and a.keyword.value == "non_blocking"
                                                  for a in call.args):
        return False
    if func.attr.value == "cuda":
        return all(a.keyword is not None or not a.star for a in call.args) and len(call.args) <= 1
    if func.attr.value != "to":
        return False
    positional = positional_args(call, ignore_starred=True)
    if positional is None or any(a.star for a in call.args):
        return False
    target = positional[0] if positional else next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return target is not None and _is_device(target, ctx) and len(positional) <= 2


def _copies_in(facts: TrainingFacts, loop: cst.For, batch: set[str], custom_collate: bool) -> list[cst.Call]:
    ctx = facts.ctx
    names = set(batch)
    # `x, y = batch` / `images = batch["image"]`: names unpacked from the batch carry it on
    for statement in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and _base_name(small.value) in names and not isinstance(
                        small.value, cst.Call):
                    for target in small.targets:
                        names |= _names(target.target)
    found: list[cst.Call] = []
    for call in facts.calls:
        if not facts.contains(loop.body, call) or not _host_to_device(call, ctx):
            continue
        if any(isinstance(a, (cst.FunctionDef, cst.Lambda)) for a in facts.ancestors(call)
               if facts.contains(loop, a)):
            continue
        receiver = call.func.value  # type: ignore[attr-defined]
        base = _base_name(_unshaped(receiver))
        if base not in names:
            continue
        if custom_collate and isinstance(receiver, cst.Name) and receiver.value in _whole_batch(loop):
            continue  # a batch a collate_fn built: its own `.to()` may not take non_blocking
        if _read_on_host(facts, loop, call):
            continue
        found.append(call)
    return found


def _whole_batch(loop: cst.For) -> set[str]:
    """The name a loop binds to a whole batch: `batch` in `for batch in ...` and `for i, batch in
    enumerate(...)`; the parts of an unpacked batch (`for x, y in ...`) are not."""
    target: cst.BaseExpression = loop.target
    source = loop.iter
    if isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value == "enumerate" \
            and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        target = target.elements[1].value
    return {target.value} if isinstance(target, cst.Name) else set()


def _read_on_host(facts: TrainingFacts, loop: cst.For, call: cst.Call) -> bool:
    """The copy's result is read on the host in the loop: `.to(device).item()`, or a name it is
    assigned to later passed to `.item()`, `.tolist()`, `.numpy()`, `.cpu()` or `print()`."""
    parent = facts.parent(call)
    if isinstance(parent, cst.Attribute) and parent.attr.value in _HOST_READS:
        return True
    assigned: set[str] = set()
    if isinstance(parent, cst.Assign):
        for target in parent.targets:
            assigned |= _names(target.target)
    elif isinstance(parent, cst.Element):  # `x, y = x.to(device), y.to(device)`
        tuple_node = facts.parent(parent)
        assign = facts.parent(tuple_node) if tuple_node is not None else None
        if isinstance(assign, cst.Assign) and isinstance(tuple_node, cst.Tuple) and len(assign.targets) == 1:
            destination = assign.targets[0].target
            index = next(i for i, e in enumerate(tuple_node.elements) if e is parent)
            if isinstance(destination, (cst.Tuple, cst.List)) and index < len(destination.elements):
                assigned = _names(destination.elements[index].value)
    if not assigned:
        return False
    for other in facts.calls:
        if not facts.contains(loop.body, other) or not facts.before(call, other):
            continue
        func = other.func
        if isinstance(func, cst.Attribute) and func.attr.value in _HOST_READS and _chain_base(func.value) in assigned:
            return True
        if isinstance(func, cst.Name) and func.value in _HOST_FUNCTIONS and any(
                _chain_base(a.value) in assigned for a in other.args):
            return True
    return False
