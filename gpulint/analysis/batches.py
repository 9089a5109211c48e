"""Where a DataLoader's batches go: the loops that read them and the calls that move them to a device.

GPU101's advice (pin the loader's memory) pays off only when the batches are copied to a GPU,
and most when that copy is asynchronous (`.to(device, non_blocking=True)`). This analysis follows
a DataLoader call to the code that iterates it: the name or `self.<attr>` it is stored in, a
function it is returned from or handed to (one level), `enumerate`/`tqdm`/`zip`/`iter` around it,
and `next(...)` on it; then, in each loop body, the `.to(...)` / `.cuda(...)` calls on the batch
or on what is taken from it (`x, y = batch`, `{k: v.to(device) for k, v in batch.items()}`).
Frameworks that move batches themselves count too: Accelerate (`accelerator.prepare(loader)`,
synchronous by default) and Lightning (`trainer.fit(model, loader)`, `*_dataloader()` hooks;
non-blocking on CUDA). Anything not followed is "not known", never "not moved".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import libcst as cst

from gpulint.analysis.training import training_facts
from gpulint.core.context import FileContext
from gpulint.core.names import NameUses, dotted
from gpulint.core.walk import walk

# calls that hand the loader's batches on unchanged: `for i, b in enumerate(tqdm(loader))`
_PASS_THROUGH = frozenset({"enumerate", "tqdm", "zip", "iter", "trange", "islice", "cycle", "chain"})
_LIGHTNING_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
_LIGHTNING_FIT = frozenset({"fit", "validate", "test", "predict"})
MOVES = frozenset({"to", "cuda"})


@dataclass
class BatchUse:
    """What the file shows of a loader's batches."""

    moves: list[cst.Call] = field(default_factory=list)  # `.to(...)`/`.cuda(...)` on a batch, in a loop over it
    framework: Optional[str] = None  # "accelerate" or "lightning": the framework moves the batches
    iterated: bool = False  # some loop (or next()) over the loader was found

    @property
    def non_blocking(self) -> bool:
        """A move already asks for an asynchronous copy (or the framework makes one: Lightning on CUDA)."""
        return self.framework == "lightning" or any(_non_blocking(c) for c in self.moves)


def _non_blocking(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "non_blocking"
               and not (isinstance(a.value, cst.Name) and a.value.value == "False") for a in call.args)


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[cst.Name] = []
        self.attributes: list[cst.Attribute] = []
        self.fors: list[cst.For] = []
        self.comps: list[cst.CompFor] = []
        self.functions: list[cst.FunctionDef] = []
        self.calls: list[cst.Call] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.attributes.append(node)
        walk(node.value, self)  # `.attr` is not a name read
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)  # a keyword is not a name read
        return False

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.comps.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)


def _index(ctx: FileContext) -> _Collect:
    found = _Collect()
    walk(ctx.module, found)
    return found


def loader_batches(ctx: FileContext, loader: cst.Call) -> BatchUse:
    """Follow the DataLoader call `loader` to the loops that read its batches (see the module docstring)."""
    return _Follower(ctx).follow(loader)


class _Follower:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.facts = ctx.analysis(training_facts)
        self.index = ctx.analysis(_index)
        self.use = BatchUse()
        self.seen: set[int] = set()

    def follow(self, loader: cst.Call) -> BatchUse:
        self._expression(loader, depth=0)
        return self.use

    # -- where the loader value goes ------------------------------------------------------------
    def _expression(self, expr: cst.BaseExpression, depth: int) -> None:
        """`expr` evaluates to the loader: see what its surroundings do with it."""
        if id(expr) in self.seen or depth > 4:
            return
        self.seen.add(id(expr))
        parent = self.facts.parent(expr)
        if isinstance(parent, cst.Arg):
            self._argument(parent, depth)
        elif isinstance(parent, cst.For) and parent.iter is expr:
            self._loop(parent.target, parent.body)
        elif isinstance(parent, cst.CompFor) and parent.iter is expr:
            self._loop(parent.target, self.facts.parent(parent))
        elif isinstance(parent, cst.Assign) and parent.value is expr:
            for target in parent.targets:
                self._stored(target.target, depth)
        elif isinstance(parent, (cst.AnnAssign,)) and parent.value is expr:
            self._stored(parent.target, depth)
        elif isinstance(parent, cst.Return):
            self._returned(expr, depth)
        elif isinstance(parent, (cst.Tuple, cst.List)) or isinstance(parent, cst.Element):
            holder = self.facts.parent(parent) if isinstance(parent, cst.Element) else parent
            if holder is not None and isinstance(holder, (cst.Tuple, cst.List)):
                self._in_container(holder, expr, depth)

    def _in_container(self, holder: cst.BaseExpression, expr: cst.BaseExpression, depth: int) -> None:
        """`return model, loader` / `a, b = x, loader`: followed only through a matching unpacking."""
        position = next((i for i, e in enumerate(holder.elements) if e.value is expr), None)  # type: ignore[attr-defined]
        parent = self.facts.parent(holder)
        if position is None:
            return
        if isinstance(parent, cst.For) and parent.iter is holder:
            self._stored(parent.target, depth)  # `for loader in (train_loader, val_loader):`
        elif isinstance(parent, cst.Assign) and parent.value is holder:
            for target in parent.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)) and len(target.target.elements) == len(
                        holder.elements):  # type: ignore[attr-defined]
                    self._stored(target.target.elements[position].value, depth)
        elif isinstance(parent, cst.Return):
            self._returned(holder, depth, position)

    def _argument(self, arg: cst.Arg, depth: int) -> None:
        call = self.facts.parent(arg)
        if not isinstance(call, cst.Call):
            return
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in _PASS_THROUGH:
            if name == "iter":
                self._iterator(call, depth)
            self._expression(call, depth + 1)
            return
        if name == "next":
            self._next(call)
            return
        if name == "prepare" and isinstance(func, cst.Attribute):
            self.use.framework = self.use.framework or "accelerate"  # accelerator.prepare(..., loader, ...)
            self.use.iterated = True
            return
        if name in _LIGHTNING_FIT and isinstance(func, cst.Attribute):
            self.use.framework = "lightning"
            self.use.iterated = True
            return
        if isinstance(func, cst.Name) and arg.keyword is None and not arg.star:
            self._into_function(func, call, arg, depth)
        elif isinstance(func, cst.Name) and arg.keyword is not None:
            self._into_function(func, call, arg, depth)

    def _stored(self, target: cst.BaseExpression, depth: int) -> None:
        if isinstance(target, cst.Name):
            for use in self._uses_of(target):
                self._expression(use, depth + 1)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            for attribute in self.index.attributes:
                if attribute is not target and attribute.attr.value == target.attr.value and \
                        isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
                    self._expression(attribute, depth + 1)

    def _uses_of(self, target: cst.Name) -> Iterable[cst.Name]:
        """Reads of the name bound by `target`, in the same scope."""
        names = self.ctx.names
        owner = names.binding_scope(target)
        if owner is None:
            return []
        found = []
        for use in self.index.names:
            if use is target or use.value != target.value or names.binding_scope(use) is not owner:
                continue
            if isinstance(owner.node, cst.Module) or self.facts.before(target, use):
                found.append(use)  # a global is read by functions defined anywhere
        return found

    def _returned(self, expr: cst.BaseExpression, depth: int, position: Optional[int] = None) -> None:
        """Returned from a function (or a Lightning `*_dataloader` hook): follow its callers in the file."""
        function = next((a for a in self.facts.ancestors(expr) if isinstance(a, cst.FunctionDef)), None)
        if function is None:
            return
        if function.name.value in _LIGHTNING_HOOKS:
            self.use.framework = "lightning"
            self.use.iterated = True
            return
        for call in self.index.calls:
            func = call.func
            called = func.value if isinstance(func, cst.Name) else (
                func.attr.value if isinstance(func, cst.Attribute) and dotted(func.value) == "self" else None)
            if called != function.name.value:
                continue
            if position is None:
                self._expression(call, depth + 1)
                continue
            parent = self.facts.parent(call)
            if isinstance(parent, cst.Assign):
                for target in parent.targets:
                    if isinstance(target.target, (cst.Tuple, cst.List)) and position < len(target.target.elements):
                        self._stored(target.target.elements[position].value, depth + 1)

    def _into_function(self, func: cst.Name, call: cst.Call, arg: cst.Arg, depth: int) -> None:
        """`train(model, loader, ...)`: the loader is the function's parameter there."""
        definition = next((f for f in self.index.functions if f.name.value == func.value), None)
        if definition is None or self.ctx.names.binding_scope(func) is None:
            return
        params = list(definition.params.posonly_params) + list(definition.params.params)
        if arg.keyword is not None:
            param = next((p for p in params + list(definition.params.kwonly_params)
                          if p.name.value == arg.keyword.value), None)
        else:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            position = next((i for i, a in enumerate(positional) if a is arg), None)
            param = params[position] if position is not None and position < len(params) else None
        if param is None:
            return
        for use in self.index.names:
            if use.value == param.name.value and use is not param.name and \
                    self.facts.contains(definition, use) and self.ctx.names.binding_scope(use) is \
                    self.ctx.names.scopes.get(id(definition)):
                self._expression(use, depth + 1)

    def _iterator(self, call: cst.Call, depth: int) -> None:
        """`it = iter(loader)`, then `batch = next(it)`."""
        parent = self.facts.parent(call)
        if isinstance(parent, cst.Assign):
            for target in parent.targets:
                if isinstance(target.target, cst.Name):
                    for use in self._uses_of(target.target):
                        holder = self.facts.parent(use)
                        outer = self.facts.parent(holder) if isinstance(holder, cst.Arg) else None
                        if isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) \
                                and outer.func.value == "next":
                            self._next(outer)

    def _next(self, call: cst.Call) -> None:
        """`batch = next(...)`: the batch is read in the statements of the same block after it."""
        self.use.iterated = True
        parent = self.facts.parent(call)
        if isinstance(parent, cst.Assign):
            scope = self.facts.scope_of(call)
            self._moves_in(parent.targets[0].target, scope)

    # -- what a loop does with the batch --------------------------------------------------------
    def _loop(self, target: cst.BaseExpression, body: Optional[cst.CSTNode]) -> None:
        self.use.iterated = True
        if body is not None:
            self._moves_in(target, body)

    def _moves_in(self, target: cst.BaseExpression, body: cst.CSTNode) -> None:
        batch = NameUses.of(target).writes if not isinstance(target, cst.Name) else {target.value}
        if isinstance(target, (cst.Tuple, cst.List)):
            batch = set()
            for element in target.elements:
                batch |= _bound(element.value)
        found = _Collect()
        walk(body, found)
        statements: list[cst.CSTNode] = []

        class _Lines(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                statements.append(node)

        walk(body, _Lines())
        changed = True
        while changed:  # names taken from the batch: `x, y = batch`, `inputs = batch["x"]`
            changed = False
            for node in statements:
                if isinstance(node, cst.Assign) and NameUses.of(node.value).reads & batch:
                    for t in node.targets:
                        new = _bound(t.target) - batch
                        if new:
                            batch |= new
                            changed = True
            for comp in found.comps:
                if NameUses.of(comp.iter).reads & batch:
                    new = _bound(comp.target) - batch
                    if new:
                        batch |= new
                        changed = True
        for call in found.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in MOVES and \
                    NameUses.of(func.value).reads & batch and _to_a_device(call):
                self.use.moves.append(call)


def _bound(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= _bound(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _bound(target.value)
    return set()


def _to_a_device(call: cst.Call) -> bool:
    """`.cuda(...)`, or `.to(...)` with a device (not only a dtype, not "cpu")."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
        return True
    for arg in call.args:
        value = arg.value
        if arg.keyword is not None and arg.keyword.value not in ("device", "non_blocking"):
            continue
        if isinstance(value, cst.SimpleString) and "cpu" in value.value:
            return False
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "torch" \
                and value.attr.value in ("float32", "float16", "bfloat16", "float", "long", "int64", "half"):
            return False
    return bool(call.args)
