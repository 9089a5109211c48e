"""Where the batches of a loader another module builds go, read on the module that iterates them.

pytorch-cifar100 builds its DataLoaders in `utils.get_training_dataloader()` and copies their batches
to the GPU in `train.py`; the module that builds the loader (where `pin_memory=True` goes) shows no
copy. This module reduces the consuming file to facts the building file may ask about: for each call
of an imported function whose result (or one element of a returned tuple, or one key of a returned
dict) a loop of the file iterates, how the loop's body (or a function of the file it hands the batch
to) copies the batch to a device. Read from CPython's `ast` only (project/facts.py's layer): a value
that is rebound, stored somewhere this module does not follow, or handed to something it cannot read is
simply not listed (unknown, never evidence).

Facts (FileFacts.moved_results): "<callee as spelled><slot>" -> kinds, where the slot is "" for the
whole result, "[0]" for a tuple element, "['train']" for a dict key; the kinds are MOVED, NON_BLOCKING,
CUDA (the copy names a CUDA device: `.cuda()`, "cuda:0", an integer index) and "at:<device as written>"
for a named device (`CFG.device`), which the project view resolves against the file's imports. In a file
with a `from module import *`, a call of a name the file binds nowhere is keyed "*<name>": the project
view matches it to the star-imported project modules (Diffusion-Models-pytorch: `from utils import *`,
then `get_data(args)`). A result handed to an imported class (`Solver(config, train_loader)`) is the kind
"hand:Solver#1"; the file defining the class says what its methods do with what its constructor keeps
(FileFacts.member_moves), and the project view joins the two.
"""

from __future__ import annotations

import ast
import builtins
from functools import cached_property
from typing import Callable, Iterable, Iterator, Optional, Union

from gpulint.project import ast_nodes
from gpulint.project.ast_nodes import CODE_FIELDS, CODE_SCOPES, all_nodes, code_fields, spans_any
from gpulint.project.ast_nodes import walk as walk_nodes

# calls that hand the items of an iterable on unchanged: `for i, b in enumerate(tqdm(loader))`
ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "track", "progress_bar", "ProgressBar", "Bar", "trange"})
# words of a name that holds a device (`device`, `args.local_rank`, `self.gpu`, `cuda_device`)
DEVICE_WORDS = ("device", "rank", "gpu", "cuda")

MOVED = "moved"
NON_BLOCKING = "non-blocking"
CUDA = "cuda"
AT = "at:"  # a named device, as written in the consuming file
IN = "in:"  # the consuming file (added by the project view, for the message)
STAR = "*"  # a key's prefix: a name the file binds nowhere, which a `from module import *` may bring
HAND = "hand:"  # the value is handed to an imported class: "hand:<class as spelled>#<position or keyword>"
_BUILTINS = frozenset(dir(builtins))

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_DEPTH = 4
_SCOPE_KINDS = frozenset(CODE_SCOPES)


def dotted(expr: ast.AST) -> Optional[str]:
    """`a.b.c` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _bound(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in _bound(element)}
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return set()


def _reads(expr: ast.AST) -> set[str]:
    return {n.id for n in walk_nodes(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def own_nodes(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of these statements, not those of functions, lambdas or classes defined in them."""
    return ast_nodes.own_nodes(body)


def move_kinds(call: ast.Call) -> set[str]:
    """`call` as a copy to a device: MOVED with NON_BLOCKING, and CUDA or "at:<device>"; empty when it is
    none (`.cpu()`, `.to("cpu")`, `.to(torch.float16)`, `.to(other_tensor)`)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("to", "cuda"):
        return set()
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return set()
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    kinds = {MOVED}
    blocking = keywords.get("non_blocking")
    if blocking is not None and not (isinstance(blocking, ast.Constant) and blocking.value is False):
        kinds.add(NON_BLOCKING)
    if func.attr == "cuda":
        return kinds | {CUDA}
    target = call.args[0] if call.args else keywords.get("device")
    if isinstance(target, ast.Call) and dotted(target.func) == "torch.device" and target.args:
        target = target.args[0]
    if isinstance(target, ast.Constant):
        value = target.value
        if isinstance(value, str) and value.split(":")[0] == "cuda":
            return kinds | {CUDA}
        if isinstance(value, int) and not isinstance(value, bool):
            return kinds | {CUDA}
        return set()  # "cpu", "mps", a dtype string
    spelled = dotted(target) if target is not None else None
    if spelled is None or spelled.startswith("torch."):
        return set()
    if not device_word(spelled.rpartition(".")[2]):
        return set()
    return kinds | {AT + spelled}


class _Names:
    """The bindings and reads of one name in one scope (not in the functions, lambdas or classes inside)."""

    __slots__ = ("stores", "loads")

    def __init__(self) -> None:
        self.stores = 0
        self.loads: list[ast.Name] = []


class _Flow:
    """One pass over the tree: each node's parent, and each scope's names (what `uses` reads)."""

    def __init__(self, tree: ast.Module, imported: Optional[set[str]] = None) -> None:
        self.tree = tree
        self.imported = imported  # the names the file's imports bind (for values handed to imported classes)
        self.parents: dict[int, ast.AST] = {}
        self.scope_of: dict[int, ast.AST] = {}  # a Name node -> the scope it is in
        self.names: dict[int, dict[str, _Names]] = {id(tree): {}}
        self.all_functions: list[FunctionNode] = []
        self.calls: list[ast.Call] = []
        stack: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
        parents, push, pop = self.parents, stack.append, stack.pop
        Name, Call, Load, fields_of = ast.Name, ast.Call, ast.Load, CODE_FIELDS
        while stack:  # (children as `children` lists them, but expression contexts: no walk asks about those)
            node, scope = pop()
            kind = type(node)
            if kind is Name:  # a third of the nodes, and no child but its context
                self.scope_of[id(node)] = scope
                entry = self.names[id(scope)].get(node.id)  # type: ignore[attr-defined]
                if entry is None:
                    entry = self.names[id(scope)][node.id] = _Names()  # type: ignore[attr-defined]
                if isinstance(node.ctx, Load):  # type: ignore[attr-defined]
                    entry.loads.append(node)  # type: ignore[arg-type]
                else:
                    entry.stores += 1
                continue
            body: Optional[set[int]] = None
            if kind in _SCOPE_KINDS:
                self.names[id(node)] = {}
                if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                    self.all_functions.append(node)  # type: ignore[arg-type]
                # decorators, defaults and bases are evaluated in the enclosing scope
                held = node.body  # type: ignore[attr-defined]
                body = {id(b) for b in held} if isinstance(held, list) else {id(held)}
            elif kind is Call:
                self.calls.append(node)  # type: ignore[arg-type]
            fields = fields_of.get(kind)
            if fields is None:
                fields = code_fields(kind)
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if item is not None:  # (a node: ast_nodes.HOLES)
                            parents[id(item)] = node
                            push((item, node if body is not None and id(item) in body else scope))
                elif value is not None:
                    parents[id(value)] = node
                    push((value, node if body is not None and id(value) in body else scope))
        self.functions: dict[str, FunctionNode] = {}
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[statement.name] = statement

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        return self.parents.get(id(node))

    @cached_property
    def declared(self) -> frozenset[str]:
        """The names a def, class or import statement binds anywhere in the file."""
        found: set[str] = set()
        for node in all_nodes(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
        return frozenset(found)

    def unbound(self, name: ast.Name) -> bool:
        """No scope from the name's own out to the module binds it, and it is no builtin: a name only a
        `from module import *` can bring."""
        if name.id in _BUILTINS or name.id in self.declared:
            return False
        scope: Optional[ast.AST] = self.scope_of.get(id(name))
        while scope is not None:
            entry = self.names.get(id(scope), {}).get(name.id)
            if (entry is not None and entry.stores) or (
                    isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    and name.id in parameter_names(scope)):
                return False
            if isinstance(scope, ast.Module):
                return True
            scope = self.parent(scope)
            while scope is not None and not isinstance(scope, (*CODE_SCOPES, ast.Module)):
                scope = self.parent(scope)
        return False

    # -- the value of the call, followed to the loops over it --------------------------------------
    def follow(self, expr: ast.expr, slot: str, depth: int, out: dict[str, set[str]]) -> None:
        if depth > _DEPTH:
            return
        parent = self.parent(expr)
        while isinstance(parent, ast.Call) and parent.args and parent.args[0] is expr \
                and _call_name(parent.func) in ITERATION_WRAPPERS:
            expr, parent = parent, self.parent(parent)
        if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is expr:
            kinds = self.loop_moves(parent)
            if kinds:
                out.setdefault(slot, set()).update(kinds)
        elif isinstance(parent, ast.Assign) and parent.value is expr and len(parent.targets) == 1:
            target = parent.targets[0]
            if isinstance(target, ast.Name):
                for use in self.uses(target):
                    self.follow(use, slot, depth + 1, out)
            elif isinstance(target, ast.Subscript):
                self.stored_under_key(target, slot, depth, out)
            elif isinstance(target, (ast.Tuple, ast.List)) and not slot:
                for index, element in enumerate(target.elts):
                    if isinstance(element, ast.Starred):
                        break
                    if isinstance(element, ast.Name):
                        for use in self.uses(element):
                            self.follow(use, f"[{index}]", depth + 1, out)
                    elif isinstance(element, ast.Subscript):
                        self.stored_under_key(element, f"[{index}]", depth, out)
        elif isinstance(parent, ast.Subscript) and parent.value is expr and not slot \
                and isinstance(parent.slice, ast.Constant) and isinstance(parent.slice.value, (str, int)) \
                and not isinstance(parent.slice.value, bool):
            self.follow(parent, f"[{parent.slice.value!r}]", depth + 1, out)
        elif isinstance(parent, ast.Call) and parent.func is not expr:
            for use in self.parameter_uses(parent, expr):
                self.follow(use, slot, depth + 1, out)
            handed = self.handed_to_import(parent, expr)
            if handed:
                out.setdefault(slot, set()).add(HAND + handed)
        elif isinstance(parent, ast.keyword) and isinstance(self.parent(parent), ast.Call):
            handed = self.handed_to_import(self.parent(parent), parent)  # type: ignore[arg-type]
            if handed:
                out.setdefault(slot, set()).add(HAND + handed)

    def stored_under_key(self, target: ast.Subscript, slot: str, depth: int, out: dict[str, set[str]]) -> None:
        """`loaders["tar"] = get_loader(...)`: the value is one of a dict's (or list's) items, under a constant
        key, in a name bound once (`loaders = {}`). The reads of that name that take an item under the same key
        or a key only known when the code runs (`for x, y in loaders[phase]`) are followed, here and in the
        module-level functions of the file the name is handed to (finetune_AlexNet_ResNet of blind23)."""
        key = target.slice
        if not (isinstance(target.value, ast.Name) and isinstance(key, ast.Constant)):
            return
        holder = target.value
        scope = self.scope_of.get(id(holder))
        if not isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        entry = self.names[id(scope)].get(holder.id)
        if entry is None or entry.stores != 1 or (not isinstance(scope, ast.Module)
                                                  and holder.id in parameter_names(scope)):
            return  # the container is bound more than once (or handed in): which one holds the loader is unclear
        for use in entry.loads:
            self.item_reads(use, key.value, slot, depth + 1, out)

    def item_reads(self, use: ast.Name, key: object, slot: str, depth: int, out: dict[str, set[str]]) -> None:
        """A read of a container holding the value under `key`: its items taken under that key or an unknown
        one are followed as the value; the container handed to a function of the file, into that function."""
        if depth > _DEPTH:
            return
        parent = self.parent(use)
        if isinstance(parent, ast.Subscript) and parent.value is use and isinstance(parent.ctx, ast.Load):
            index = parent.slice
            if isinstance(index, ast.Slice) or (isinstance(index, ast.Constant) and index.value != key) \
                    or key not in self.loop_keys(index):
                return
            self.follow(parent, slot, depth + 1, out)
        elif isinstance(parent, ast.Call) and parent.func is not use:
            for inner in self.parameter_uses(parent, use):
                self.item_reads(inner, key, slot, depth + 1, out)

    def loop_keys(self, index: ast.expr) -> _Keys:
        """The keys a subscript's index may take: `phase` of an enclosing `for phase in ["src", "val"]` takes
        those constants; any other index may take any key (ANY_KEY)."""
        if not isinstance(index, ast.Name):
            return ANY_KEY
        node: Optional[ast.AST] = self.parent(index)
        while node is not None and not isinstance(node, (*CODE_SCOPES, ast.Module)):
            if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name) \
                    and node.target.id == index.id:
                values = node.iter
                if isinstance(values, (ast.List, ast.Tuple, ast.Set)) \
                        and all(isinstance(v, ast.Constant) for v in values.elts):
                    return _Keys(frozenset(v.value for v in values.elts))  # type: ignore[attr-defined]
                return ANY_KEY
            node = self.parent(node)
        return ANY_KEY

    def handed_to_import(self, call: ast.Call, expr: ast.AST) -> Optional[str]:
        """`Solver(config, train_loader, ...)` with `Solver` imported (a capitalised name: a class, whose
        constructor may keep the value): "Solver#1", or "Solver#train_loader" for a keyword."""
        spelled = dotted(call.func)
        if spelled is None or not class_like(spelled) or self.imported is None \
                or spelled.split(".", 1)[0] not in self.imported:
            return None
        if isinstance(expr, ast.keyword):
            return f"{spelled}#{expr.arg}" if expr.arg else None
        if expr not in call.args:
            return None
        index = call.args.index(expr)
        if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            return None
        return f"{spelled}#{index}"

    def uses(self, target: ast.Name) -> list[ast.Name]:
        """Reads of the name `target` binds, when that is its only binding in its scope: in the same scope,
        and for a module-level name also in the functions that do not bind it themselves."""
        scope = self.scope_of.get(id(target))
        if not isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        entry = self.names[id(scope)].get(target.id)
        if entry is None or entry.stores != 1 or (not isinstance(scope, ast.Module)
                                                  and target.id in parameter_names(scope)):
            return []
        found = list(entry.loads)
        if isinstance(scope, ast.Module):
            for function in self.all_functions:
                inner = self.names[id(function)].get(target.id)
                if inner is not None and not inner.stores and target.id not in parameter_names(function):
                    found += inner.loads
        return found

    def parameter_uses(self, call: ast.Call, expr: ast.expr) -> list[ast.Name]:
        """`train(model, loader)`: the reads of the parameter of a module-level function of the file the
        value is passed as (never rebound there)."""
        function = self.functions.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if function is None:
            return []
        positional = [*function.args.posonlyargs, *function.args.args]
        name: Optional[str] = None
        if expr in call.args:
            index = call.args.index(expr)
            if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]) or index >= len(positional):
                return []
            name = positional[index].arg
        else:
            keyword = next((k for k in call.keywords if k.value is expr), None)
            if keyword is None or keyword.arg is None:
                return []
            name = keyword.arg
        entry = self.names[id(function)].get(name)
        return [] if entry is None or entry.stores else list(entry.loads)

    # -- the body of a loop over it ------------------------------------------------------------------
    def loop_moves(self, loop: Union[ast.For, ast.AsyncFor]) -> set[str]:
        target: ast.AST = loop.target
        if isinstance(loop.iter, ast.Call) and _call_name(loop.iter.func) == "enumerate" \
                and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
            target = target.elts[1]
        return self.moves_of(_bound(target), loop.body, steps=True)

    def moves_of(self, batch: set[str], body: list[ast.stmt], steps: bool) -> set[str]:
        """The kinds of the copies of the batch names (and names taken from them) in these statements, and
        with `steps`, in the module-level functions of the file they are handed to."""
        nodes = list(own_nodes(body))
        batch = _taken_from(batch, nodes)
        kinds: set[str] = set()
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda") and _reads(func.value) & batch:
                kinds |= move_kinds(node)
            elif steps and isinstance(func, ast.Name) and func.id in self.functions:
                kinds |= self.step_moves(self.functions[func.id], node, batch)
        return kinds

    def step_moves(self, function: FunctionNode, call: ast.Call, batch: set[str]) -> set[str]:
        """`train_step(model, batch)`: the copies the function makes of the parameters handed a batch."""
        positional = [*function.args.posonlyargs, *function.args.args]
        handed: set[str] = set()
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred):
                break
            if index < len(positional) and _reads(argument) & batch:
                handed.add(positional[index].arg)
        handed |= {k.arg for k in call.keywords if k.arg is not None and _reads(k.value) & batch}
        return self.moves_of(handed, function.body, steps=False) if handed else set()


def _taken_from(batch: set[str], nodes: list[ast.AST]) -> set[str]:
    """The batch names and the names taken from them in these nodes: `x, y = batch`, `images = images.cuda()`,
    `{k: v for k, v in batch.items()}`, `for k, v in batch.items():`."""
    return _closure(batch, _takings(nodes))


def _takings(nodes: list[ast.AST]) -> list[tuple[Union[set[str], str], set[str]]]:
    """For `_taken_from`: each binding that may take a part of a batch, as (the names read, or the one name
    whose items a loop takes) -> the names bound."""
    found: list[tuple[Union[set[str], str], set[str]]] = []
    for node in nodes:
        if isinstance(node, ast.Assign):
            found.append((_reads(node.value), {n for t in node.targets for n in _bound(t)}))
        elif isinstance(node, ast.comprehension):
            found.append((_reads(node.iter), _bound(node.target)))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            source = _items_source(node.iter)
            if source is not None:
                found.append((source, _bound(node.target)))
    return found


def _closure(batch: set[str], takings: list[tuple[Union[set[str], str], set[str]]]) -> set[str]:
    batch = set(batch)
    changed = True
    while changed:
        changed = False
        for read, bound in takings:
            if (read in batch if isinstance(read, str) else read & batch) and not bound <= batch:
                batch |= bound
                changed = True
    return batch


def _items_source(source: ast.expr) -> Optional[str]:
    """`batch`, `batch.items()`, `batch.values()`: the name whose own items a loop over it takes ("batch"; not
    a loop over `range(len(batch))`, whose indices are no part of it)."""
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args \
            and source.func.attr in ("items", "values"):
        source = source.func.value
    return source.id if isinstance(source, ast.Name) else None


class _Keys:
    """The keys a subscript may read: the given ones, or any (None)."""

    __slots__ = ("keys",)

    def __init__(self, keys: Optional[frozenset[object]]) -> None:
        self.keys = keys

    def __contains__(self, key: object) -> bool:
        return self.keys is None or key in self.keys


ANY_KEY = _Keys(None)


def parameter_names(function: Union[FunctionNode, ast.Lambda]) -> set[str]:
    """Every name a function's (or lambda's) parameters bind, `*args` and `**kwargs` included."""
    args = function.args
    found = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    found |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    return found


def _copies(nodes: Iterable[ast.AST], called: set[str]) -> bool:
    """A `.to(...)`/`.cuda(...)` call among these nodes; the names of the other functions called by name
    are added to `called`."""
    for node in nodes:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
                return True
            if isinstance(func, ast.Name):
                called.add(func.id)
    return False


def moved_results(tree: ast.Module, imported: set[str], loops: Optional[list[ast.AST]] = None,
                  walk: Callable[[ast.AST], Iterable[ast.AST]] = walk_nodes,
                  star: bool = False, hands: bool = False) -> dict[str, tuple[str, ...]]:
    """For each call of an imported name (`imported`: the names the file's imports bind) whose result a loop
    of the file iterates and copies to a device: "<callee as spelled><slot>" -> the kinds of those copies
    (see the module docstring). With `star` (the file has a `from module import *`), also the calls of a
    name the file binds nowhere, keyed STAR + name: which star-imported module defines it is the project
    view's to say. `loops`: the file's `for` loops when the caller already has them; the file is read
    further only when one of them copies something (most files have no such loop: a cheap test)."""
    if not imported and not star:
        return {}
    if loops is None:
        loops = [n for n in walk(tree) if isinstance(n, (ast.For, ast.AsyncFor))]
    called: set[str] = set()
    if not any(_copies((n for statement in loop.body for n in walk(statement)), called)  # type: ignore[attr-defined]
               for loop in loops) and not any(
            _copies(walk(node), set()) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in called) \
            and not hands:
        return {}  # no loop copies anything, nor hands its items to a function of the file that does
    defined = {name for node in tree.body for name in _defined(node)}
    flow = _Flow(tree, imported)
    setattr(tree, _FLOW_KEY, flow)  # (parameter_moves and self_devices read the same tree's flow again)
    out: dict[str, set[str]] = {}
    for node in flow.calls:
        spelled = dotted(node.func)
        if spelled is None or spelled.split(".", 1)[0] in defined:
            continue
        if spelled.split(".", 1)[0] not in imported:
            if not (star and isinstance(node.func, ast.Name) and flow.unbound(node.func)):
                continue
            spelled = STAR + spelled
        found: dict[str, set[str]] = {}
        flow.follow(node, "", 0, found)
        for slot, kinds in found.items():
            out.setdefault(spelled + slot, set()).update(kinds)
    return {key: tuple(sorted(kinds)) for key, kinds in sorted(out.items())}


def class_like(spelled: str) -> bool:
    """A callee spelled like a class (`Solver`, `trainers.Solver`): its constructor may keep what it is handed."""
    return spelled.rpartition(".")[2][:1].isupper()


def hands_results_to_a_class(call_results: dict[str, str], handed: list[tuple[str, list[str]]],
                             imported: set[str]) -> bool:
    """A name bound from a call of an imported name (`call_results`: name -> the call's root name, as in
    `train_loader = get_loader(...)`) is handed to a call of an imported capitalised name, a class (`handed`:
    (root, argument names), as in `Solver(config, train_loader)`). The project facts collect both in their one
    walk of the file and tell `moved_results` (its `hands`), which otherwise reads only files whose loops copy."""
    return any(root in imported and any(call_results.get(n) in imported for n in names) for root, names in handed)


def _defined(statement: ast.stmt) -> set[str]:
    """Module-level names a statement binds other than by import (a shadowing def or assignment)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, ast.Assign):
        return {n for t in statement.targets for n in _bound(t)}
    return set()


def cuda_devices(tree: ast.Module) -> tuple[str, ...]:
    """Module-level names, and attributes of module-level classes (`CFG.device`), bound once to a device
    expression that names CUDA (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, "cuda:0"):
    a config module's device, which the files that import it copy batches to."""
    found: dict[str, int] = {}
    cuda: set[str] = set()

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not prefix:
                visit(node.body, node.name + ".")
                continue
            targets: list[ast.expr] = []
            value: Optional[ast.expr] = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            for target in targets:
                if isinstance(target, ast.Name) and "device" in target.id.lower():
                    key = prefix + target.id
                    found[key] = found.get(key, 0) + 1
                    if value is not None and _names_cuda(value):
                        cuda.add(key)
            if isinstance(node, ast.If) and not prefix:
                visit(node.body, prefix)
                visit(node.orelse, prefix)

    visit(tree.body, "")
    return tuple(sorted(key for key in cuda if found[key] == 1))


def cuda_returns(tree: ast.Module) -> tuple[str, ...]:
    """The module-level functions and methods of module-level classes whose returned object has a device
    attribute bound only to devices naming CUDA: "<function>:<attr>" / "<Class>.<method>:<attr>". A function
    qualifies when each of its `return`s hands back the same local name `r`, and `r.<attr>` is bound in it
    (`args.device = torch.device("cuda" if ... else "cpu")` before `return args`); a method, when each hands back
    the same `self.<x>` (or a local name, as a function), and the class binds `self.<x>.<attr>`, or `a.<attr>`
    in a method that keeps `self.<x> = a` (deep_gcns' `OptInit.get_args`, blind20). Every binding the code
    shows counts (an assignment, a `setattr` with that name, an argparse option `--<attr>` or `dest=<attr>` of
    the module by its default, None when it has none): one that names no CUDA, or a computed `setattr`, rules
    the attribute out. The files that import the module copy to `opt.device` for `opt = OptInit().get_args()`
    (ProjectView.returned_cuda)."""
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            returned = _returned(node)
            if returned is not None and "." not in returned:
                out.extend(f"{node.name}:{attr}" for attr in _cuda_attrs(_bound_on(node, returned), tree))
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                returned = _returned(method)
                if returned is None:
                    continue
                if "." not in returned:
                    bound = _bound_on(method, returned)
                elif returned.startswith("self.") and returned.count(".") == 1:
                    bound = _bound_on(node, returned)
                    for other in node.body:
                        if isinstance(other, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            for kept in _kept_as(other, returned):
                                for attr, values in _bound_on(other, kept).items():
                                    bound.setdefault(attr, []).extend(values)
                else:
                    continue
                out.extend(f"{node.name}.{method.name}:{attr}" for attr in _cuda_attrs(bound, tree))
    return tuple(sorted(out))


def _returned(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> Optional[str]:
    """The one name (`args`, `self.args`) every `return` of `function` hands back, outside nested scopes."""
    spelled: set[Optional[str]] = set()
    pending: list[ast.AST] = list(function.body)
    while pending:  # a `return` is a statement: only statement lists (and the clauses holding them) are read
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            spelled.add(dotted(node.value) if node.value is not None else None)
            continue
        for name in ast_nodes.block_fields(type(node)):
            block = getattr(node, name, None)
            if type(block) is list:
                pending.extend(block)
    return next(iter(spelled)) if len(spelled) == 1 else None


def _kept_as(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], attribute: str) -> set[str]:
    """The local names `function` stores as `attribute` (`self.args = args`: "args")."""
    return {node.value.id for node in walk_nodes(function) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name) and any(dotted(t) == attribute for t in node.targets)}


def _bound_on(scope: ast.AST, owner: str) -> dict[str, list[Optional[ast.expr]]]:
    """The attributes of `owner` (a name or `self.x`) bound in `scope` -> their values (None: a value that
    cannot be read, a computed `setattr` is keyed "*")."""
    out: dict[str, list[Optional[ast.expr]]] = {}
    for node in walk_nodes(scope):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and dotted(target.value) == owner:
                out.setdefault(target.attr, []).append(getattr(node, "value", None))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) == 3 and dotted(node.args[0]) == owner:
            name = node.args[1]
            key = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "*"
            out.setdefault(key, []).append(node.args[2])
    return out


def _cuda_attrs(bound: dict[str, list[Optional[ast.expr]]], scope: ast.AST) -> list[str]:
    """The device attributes among `bound` whose every value, the defaults of the argparse options of the
    module (`scope`) that fill them included, names CUDA."""
    if "*" in bound:
        return []
    out: list[str] = []
    for attr, values in sorted(bound.items()):
        if not device_word(attr):
            continue
        values = values + _option_defaults(scope, attr)
        if all(v is not None and _names_cuda(v) for v in values):
            out.append(attr)
    return out


def _option_defaults(scope: ast.AST, attr: str) -> list[Optional[ast.expr]]:
    """The defaults of the argparse options of `scope` that fill `attr` (`--device`, `dest="device"`);
    None for one without a default."""
    out: list[Optional[ast.expr]] = []
    for node in walk_nodes(scope):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        dest = keywords.get("dest")
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        named = isinstance(dest, ast.Constant) and dest.value == attr if dest is not None else any(
            flag.lstrip("-").replace("-", "_") == attr for flag in flags)
        if named:
            out.append(keywords.get("default"))
    return out


def _names_cuda(value: ast.expr) -> bool:
    """A device expression that names CUDA: a "cuda..." string or `torch.cuda` somewhere in it, and no other
    accelerator ("mps", "xpu")."""
    strings = [n.value for n in walk_nodes(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if any(s.split(":")[0] in ("mps", "xpu") for s in strings):
        return False
    return any(s.split(":")[0] == "cuda" for s in strings) or any(
        isinstance(n, ast.Attribute) and n.attr == "cuda" and dotted(n) == "torch.cuda" for n in walk_nodes(value))


def member_moves(tree: ast.Module, loops: Optional[list[ast.AST]] = None) -> dict[str, tuple[str, ...]]:
    """What a module-level class does with a value its constructor keeps (`self.train_loader = train_loader`),
    read where a method iterates it: "<Class>#<index>" (the parameter's position after `self`) and
    "<Class>#<name>" -> the kinds of the loop's copies (MOVED, NON_BLOCKING, CUDA). A copy to `self.<attr>` that
    the class binds only to a device naming CUDA (`self.device = torch.device("cuda" if ... else "cpu")`) is CUDA.
    The other half of HAND: a file hands a loader it got from an imported function to `Solver(...)`
    (Image_Segmentation of blind9). `loops`: the file's `for` loops when the caller has them: a file none of
    whose loops iterates an attribute of `self` is not read further."""
    # the lines of the loops over an attribute of self: only the classes holding one are read
    lines = None if loops is None else [loop.lineno for loop in loops  # type: ignore[attr-defined]
                                        if _self_attribute(loop.iter)]  # type: ignore[attr-defined]
    if lines == []:
        return {}
    flow: Optional[_Flow] = None
    out: dict[str, tuple[str, ...]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or (lines is not None and not any(
                cls.lineno <= line <= (cls.end_lineno or cls.lineno) for line in lines)):
            continue
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        params = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        kept: dict[str, str] = {}  # attribute -> parameter
        for statement in walk_nodes(init):
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name) \
                    and statement.value.id in params:
                for target in statement.targets:
                    if isinstance(target, ast.Attribute) and dotted(target) == f"self.{target.attr}":
                        kept[target.attr] = statement.value.id
        if not kept:
            continue
        devices = _self_devices(cls)
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method is init:
                continue
            for loop in walk_nodes(method):
                if not isinstance(loop, (ast.For, ast.AsyncFor)):
                    continue
                attr = _self_attribute(loop.iter)
                if attr is None or attr not in kept:
                    continue
                flow = flow or _flow_of(tree)
                kinds = set(flow.loop_moves(loop))
                if {AT + f"self.{d}" for d in devices} & kinds:
                    kinds.add(CUDA)
                kinds = {k for k in kinds if not k.startswith(AT)}
                if not kinds:
                    continue
                param = kept[attr]
                for key in (f"{cls.name}#{params.index(param)}", f"{cls.name}#{param}"):
                    out[key] = tuple(sorted(set(out.get(key, ())) | kinds))
    return out


_FLOW_KEY = "_gpulint_flow"


def _flow_of(tree: ast.Module) -> "_Flow":
    """The flow `moved_results` built for this tree, or a new one: its parents and scopes are the same whatever
    the file imports, and the copies a loop makes (`loop_moves`) never read the imported names, which only
    `follow` uses for values handed to imported classes."""
    flow = getattr(tree, _FLOW_KEY, None)
    return flow if isinstance(flow, _Flow) else _Flow(tree)


def parameter_moves(tree: ast.Module, loops: Optional[list[ast.AST]] = None) -> dict[str, tuple[str, ...]]:
    """What a module-level function does with a value handed to it, read where its own loop iterates that
    parameter (never rebound in it): "<function>#<index>" (the parameter's position) and "<function>#<name>" ->
    the kinds of the loop's copies (MOVED, NON_BLOCKING, CUDA; a copy to a named device is left out: what
    it names is the caller's to say). The other half of a loader a module builds and hands to an imported
    function (ban-vqa's main.py: `train(model, train_loader, ...)` of train.py, whose loop makes `v.cuda()`,
    blind24). `loops`: the file's `for` loops when the caller has them; a file none of whose loops iterates a
    plain name is not read further."""
    lines = None if loops is None else [loop.lineno for loop in loops  # type: ignore[attr-defined]
                                        if isinstance(_unwrapped(loop.iter), ast.Name)]  # type: ignore[attr-defined]
    if lines == []:
        return {}
    flow: Optional[_Flow] = None
    out: dict[str, tuple[str, ...]] = {}
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or (lines is not None and not any(
                function.lineno <= line <= (function.end_lineno or function.lineno) for line in lines)):
            continue
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        params = set(positional) | {a.arg for a in function.args.kwonlyargs}
        inside = walk_nodes(function) if loops is None else [
            loop for loop in loops if function.lineno <= loop.lineno <= (  # type: ignore[attr-defined]
                function.end_lineno or function.lineno)]
        for loop in inside:
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            source = _unwrapped(loop.iter)
            if not isinstance(source, ast.Name) or source.id not in params:
                continue
            flow = flow or _flow_of(tree)
            scope = flow.scope_of.get(id(source))
            entry = flow.names.get(id(scope), {}).get(source.id) if scope is function else None
            if entry is None or entry.stores:
                continue  # read in a nested scope, or rebound: which value the loop iterates is unclear
            kinds = {k for k in flow.loop_moves(loop) if not k.startswith(AT)}
            if not kinds:
                continue
            keys = [f"{function.name}#{source.id}"]
            if source.id in positional:
                keys.append(f"{function.name}#{positional.index(source.id)}")
            for key in keys:
                out[key] = tuple(sorted(set(out.get(key, ())) | kinds))
    if out and flow is not None:
        _handed_on(tree, flow, out)
    return dict(sorted(out.items()))


RETURNS_SELF = "returns-self"  # method_moves: "<Class>.<method>" whose every return is `return self`


def method_moves(tree: ast.Module, lines: Optional[list[int]] = None) -> dict[str, tuple[str, ...]]:
    """What a method of a module-level class does with a value handed to it: "<Class>.<method>#<index>" (the
    parameter's position after `self`) and "<Class>.<method>#<name>" -> the kinds of the copies the method makes
    of that parameter (never rebound in it) or of items of it (`for k, v in data.items(): data[k] = v.cuda()`):
    MOVED, NON_BLOCKING, CUDA (a copy to `self.<attr>` the class binds only to a device naming CUDA is CUDA; one
    to another named device is left out). The other half of a batch a file hands to a method of an instance of
    an imported class (`model = XMemTrainer(...)`, then `model.do_pass(data, it)` in the loop over the loader:
    XMem's train.py, blind25). For those classes, "<Class>.<method>" -> (RETURNS_SELF,) for each method whose
    every return is `return self` (`XMemTrainer(...).train()` is the instance). Only the class's own methods
    (never `__init__` or a static method); an inherited one is not resolved. `lines`: the lines of the file's
    `.to(...)`/`.cuda(...)` calls when the caller has them: only the methods spanning one are read."""
    if lines is not None and not lines:
        return {}
    ordered = sorted(lines) if lines is not None else None
    out: dict[str, tuple[str, ...]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or (ordered is not None and not spans_any(cls, ordered)):
            continue
        devices: Optional[set[str]] = None
        found = False
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.name == "__init__" \
                    or any(dotted(d) in ("staticmethod", "classmethod") for d in method.decorator_list) \
                    or (ordered is not None and not spans_any(method, ordered)):
                continue
            positional = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:]
            params = positional + [a.arg for a in method.args.kwonlyargs]
            nodes = list(own_nodes(method.body))
            copies = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                      and n.func.attr in ("to", "cuda")]
            if not copies:
                continue
            stored = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            takings = _takings(nodes)
            for param in params:
                if param in stored:
                    continue  # rebound: which value is copied is unclear
                batch = _closure({param}, takings)
                kinds = set()
                for copy in copies:
                    if _reads(copy.func.value) & batch:  # type: ignore[attr-defined]
                        kinds |= move_kinds(copy)
                if any(k.startswith(AT) for k in kinds):
                    devices = _self_devices(cls) if devices is None else devices
                    if {AT + f"self.{d}" for d in devices} & kinds:
                        kinds.add(CUDA)
                kinds = {k for k in kinds if not k.startswith(AT)}
                if MOVED not in kinds:
                    continue
                found = True
                keys = [f"{cls.name}.{method.name}#{param}"]
                if param in positional:
                    keys.append(f"{cls.name}.{method.name}#{positional.index(param)}")
                for key in keys:
                    out[key] = tuple(sorted(kinds))
        if found:
            for method in cls.body:
                if isinstance(method, ast.FunctionDef) and not method.decorator_list:
                    returned = _returns_of(method)
                    if returned and all(isinstance(r, ast.Name) and r.id == "self" for r in returned):
                        out[f"{cls.name}.{method.name}"] = (RETURNS_SELF,)
    return dict(sorted(out.items()))


def _returns_of(function: FunctionNode) -> list[Optional[ast.expr]]:
    """The values of the function's own `return` statements (not those of functions defined in it)."""
    return [n.value for n in own_nodes(function.body) if isinstance(n, ast.Return)]


def _handed_on(tree: ast.Module, flow: "_Flow", out: dict[str, tuple[str, ...]]) -> None:
    """A parameter a module-level function hands, as it is, to another module-level function of the file whose
    loop copies it (`train(model, train_loader, eval_loader)` calling `evaluate(model, eval_loader)`): the
    same copies, keyed by the outer function's parameter too (up to three hand-overs)."""
    functions = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    # each function's calls of the others, taken once from the flow for the three rounds (by the scope the
    # callee's name is read in: a nested function's calls are its own)
    calls: dict[str, list[tuple[ast.Call, str]]] = {name: [] for name in functions}
    for node in flow.calls:
        if isinstance(node.func, ast.Name) and node.func.id in functions:
            scope = flow.scope_of.get(id(node.func))
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and functions.get(scope.name) is scope \
                    and node.func.id != scope.name:
                calls[scope.name].append((node, node.func.id))
    for _ in range(3):
        added = False
        for function in functions.values():
            if not calls[function.name]:
                continue
            positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            params = set(positional) | {a.arg for a in function.args.kwonlyargs}
            for call, callee in calls[function.name]:
                passed = [(str(i), a) for i, a in enumerate(call.args)
                          if not any(isinstance(b, ast.Starred) for b in call.args[:i + 1])]
                passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
                for slot, value in passed:
                    kinds = out.get(f"{callee}#{slot}")
                    if not kinds or not isinstance(value, ast.Name) or value.id not in params:
                        continue
                    entry = flow.names.get(id(function), {}).get(value.id)
                    if entry is None or entry.stores:
                        continue
                    keys = [f"{function.name}#{value.id}"]
                    if value.id in positional:
                        keys.append(f"{function.name}#{positional.index(value.id)}")
                    for key in keys:
                        merged = tuple(sorted(set(out.get(key, ())) | set(kinds)))
                        if merged != out.get(key):
                            out[key] = merged
                            added = True
        if not added:
            return


def _unwrapped(source: ast.expr) -> ast.expr:
    """`loader` in `enumerate(tqdm(loader))`."""
    while isinstance(source, ast.Call) and source.args and _call_name(source.func) in ITERATION_WRAPPERS:
        source = source.args[0]
    return source


def _self_attribute(source: ast.expr) -> Optional[str]:
    """`self.train_loader` in `enumerate(tqdm(self.train_loader))`: "train_loader"."""
    while isinstance(source, ast.Call) and source.args and _call_name(source.func) in ITERATION_WRAPPERS:
        source = source.args[0]
    spelled = dotted(source)
    return spelled[5:] if spelled is not None and spelled.startswith("self.") and spelled.count(".") == 1 else None


def _self_devices(cls: ast.ClassDef) -> set[str]:
    """Attributes of `self` the class binds only to device expressions that name CUDA."""
    return {attr for attr, cuda in _self_bindings(cls).items() if cuda}


def _self_bindings(cls: ast.ClassDef) -> dict[str, bool]:
    """Every attribute of `self` the class binds -> whether each of its values is a device naming CUDA."""
    values: dict[str, list[ast.expr]] = {}
    for node in all_nodes(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and dotted(target) == f"self.{target.attr}":
                    values.setdefault(target.attr, []).append(node.value)
    return {attr: all(_names_cuda(v) for v in bound) for attr, bound in values.items()}


def device_word(attr: str) -> bool:
    """A name that may hold a device (DEVICE_WORDS), as `move_kinds` reads a copy's target."""
    lowered = attr.lower()
    return "dtype" not in lowered and lowered != "cpu" and any(word in lowered for word in DEVICE_WORDS)


def self_devices(tree: ast.Module) -> dict[str, dict[str, bool]]:
    """The device attributes of `self` each module-level class binds (named with a DEVICE_WORDS word) -> whether
    the class binds it only to devices naming CUDA (`self.device = torch.device("cuda" if ... else "cpu")`): a
    base class whose subclasses in other modules copy to `self.device` (KAIR's ModelBase, blind11). A class
    also binds what its bases defined in the file bind (`class Mid(Base)` beside `Base`): the project view
    follows only the bases other modules define."""
    classes = {cls.name: cls for cls in tree.body if isinstance(cls, ast.ClassDef)}
    own = {name: {attr: cuda for attr, cuda in _self_bindings(cls).items() if device_word(attr)}
           for name, cls in classes.items()}
    out: dict[str, dict[str, bool]] = {}
    for name in classes:
        bound: dict[str, bool] = {}
        pending, seen = [name], set()
        while pending:
            current = pending.pop()
            if current in seen or current not in classes:
                continue
            seen.add(current)
            for attr, cuda in own[current].items():
                bound[attr] = bound.get(attr, True) and cuda
            pending.extend(b.id for b in classes[current].bases if isinstance(b, ast.Name))
        if bound:
            out[name] = dict(sorted(bound.items()))
    return out


def self_device_copies(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """The attributes of `self` the methods of each module-level class copy tensors or modules to
    (`x.to(self.device)`, as `move_kinds` reads a copy) that no class of the file binds: its bases do,
    which the project view follows through the imports (`self_devices` of their modules)."""
    out: dict[str, tuple[str, ...]] = {}
    classes = [cls for cls in tree.body if isinstance(cls, ast.ClassDef)]
    bound = {attr for cls in classes for attr in _self_bindings(cls)}  # a class of the file binds it: not a base's
    for cls in classes:
        copied = {kind[len(AT) + 5:] for node in all_nodes(cls) if isinstance(node, ast.Call)
                  for kind in move_kinds(node) if kind.startswith(AT + "self.") and kind.count(".") == 1}
        copied -= bound
        if copied:
            out[cls.name] = tuple(sorted(copied))
    return out
