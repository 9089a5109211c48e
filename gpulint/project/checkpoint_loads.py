"""A "cpu" that only says where `torch.load` maps a checkpoint's tensors names no device the parameters sit on.

`torch.load(path, map_location="cpu")` (or `map_location=torch.device("cpu")`, or "cpu" as torch.load's second
positional argument) reads a checkpoint's tensors into host memory; a state dict read so is copied by
`load_state_dict` into the parameters wherever they are (blind21: facebookresearch/jepa, CUDA-only training
scripts whose one "cpu" is the map_location of their checkpoint loads). Such a "cpu" is not evidence that the
script trains on the CPU, and every check of "the file names the CPU as a device" (project/facts.py's CPU pin,
GPU201's `fused-exists`) leaves it out through `checkpoint_cpus`.

Only where the loaded object visibly stays a checkpoint: a whole model pickled and loaded to the CPU
(`model = torch.load(path, map_location="cpu")`) is trained there unless moved, so its "cpu" still counts. The
object is followed, from CPython's `ast` alone (this layer), through the name a plain assignment binds it to (every
read of that name in its scope, nested functions included), and through what is read out of it (`ckpt["model"]`,
`ckpt.get(...)`, attributes of those, and the names they are bound to):

- the loaded object itself may only be read as a mapping (subscripted, `.get`/`.pop`/`.keys()`/`.items()`/
  `.values()`, `in`, `is None`, `del`, `len`/`print`/`isinstance`/`type`, formatted into a string), or handed to
  `load_state_dict`; returned, handed to any other call, stored on an attribute, or used as a module
  (`.parameters()`), it may be a model, and the "cpu" counts;
- what is read out of it must never be used as a module: `.parameters()`, `.named_parameters()`, `.train()`,
  `.eval()`, `.to(...)`, `.float()`, `.state_dict()` and the like, called itself (`model(x)`), or handed to a
  torch optimizer; an attribute it is stored on (`self.model = ckpt["model"]`) is searched the same way
  wherever the file reads that attribute. A value read out of it and handed on (`epoch = ckpt["epoch"]` then
  returned, `build(ckpt["args"])`) is not followed further.

Either is accepted where it is visibly moved to CUDA (`.cuda()`, `.to("cuda")`, `.to(torch.device("cuda:0"))`):
then it does not stay where the "cpu" put it.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional

from gpulint.project.ast_nodes import fast_walk, walk_with_parents

# how the caller resolves a dotted name to what it may stand for (facts: every target of an alias; a rule: its
# one qualified name)
Qualify = Callable[[ast.expr], Iterable[str]]

_LOAD = "torch.load"
_DEVICE = "torch.device"
# reads of a mapping that return one of its values
_ENTRY_METHODS = frozenset({"get", "pop", "setdefault"})
# reads of a mapping that return its keys or items
_MAPPING_METHODS = frozenset({"keys", "items", "values"})
# calls that read an object without keeping it
_READING_CALLS = frozenset({"len", "print", "isinstance", "type", "str", "repr"})
# what only a module (or a tensor moved somewhere) answers: the loaded object is trained, moved or converted
MODULE_USES = frozenset({
    "parameters", "named_parameters", "modules", "named_modules", "children", "named_children", "buffers",
    "named_buffers", "train", "eval", "forward", "cuda", "to", "cpu", "float", "half", "double", "bfloat16",
    "fuse", "state_dict", "requires_grad_", "apply", "zero_grad", "share_memory",
})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


def checkpoint_cpus(tree: ast.Module, qualify: Qualify) -> frozenset[int]:
    """The ids of the "cpu" strings, and of the `torch.device("cpu")` calls around them, that are only where a
    `torch.load` whose result stays a checkpoint maps its tensors (module docstring)."""
    nodes, parents = walk_with_parents(tree)
    reader = _Reader(tree, parents, qualify)
    found: set[int] = set()
    for node in nodes:
        if type(node) is not ast.Call or _LOAD not in qualify(node.func):
            continue
        location = _map_location(node)
        if location is None:
            continue
        cpu = _cpu(location, qualify)
        if cpu is None or not reader.stays_checkpoint(node):
            continue
        found.add(id(cpu))
        found.add(id(location))
    return frozenset(found)


def _map_location(call: ast.Call) -> Optional[ast.expr]:
    """torch.load(f, map_location=None, pickle_module=..., ...): the map_location argument, by keyword or second."""
    for keyword in call.keywords:
        if keyword.arg == "map_location":
            return keyword.value
    if len(call.args) >= 2 and not any(isinstance(a, ast.Starred) for a in call.args[:2]):
        return call.args[1]
    return None


def _cpu(location: ast.expr, qualify: Qualify) -> Optional[ast.Constant]:
    """The "cpu" (or "cpu:0") string `location` is, or the one `torch.device(...)` is built from; else None."""
    if isinstance(location, ast.Call) and _DEVICE in qualify(location.func) and len(location.args) == 1 \
            and not location.keywords:
        location = location.args[0]
    if isinstance(location, ast.Constant) and isinstance(location.value, str) \
            and location.value.split(":", 1)[0] == "cpu":
        return location
    return None


def _cuda_device(expr: ast.expr, qualify: Qualify) -> bool:
    """`"cuda"`, `"cuda:0"`, or `torch.device(...)` of one."""
    if isinstance(expr, ast.Call) and _DEVICE in qualify(expr.func) and expr.args:
        expr = expr.args[0]
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value.split(":", 1)[0] == "cuda"


def _mapping_test(compare: ast.Compare, expr: ast.expr) -> bool:
    """`"model" in ckpt`, `ckpt is None`: a test that reads the object as a mapping, or as present."""
    if len(compare.ops) != 1:
        return False
    op, right = compare.ops[0], compare.comparators[0]
    if isinstance(op, (ast.In, ast.NotIn)):
        return right is expr
    return isinstance(op, (ast.Is, ast.IsNot)) and compare.left is expr \
        and isinstance(right, ast.Constant) and right.value is None


class _Reader:
    def __init__(self, tree: ast.Module, parents: dict[int, ast.AST], qualify: Qualify) -> None:
        self.tree = tree
        self.parents = parents
        self.qualify = qualify
        self.seen: set[tuple[int, str, bool]] = set()  # (scope, name, whole): names being read

    def stays_checkpoint(self, load: ast.Call) -> bool:
        return self._value(load, whole=True)

    def _moved_to_cuda(self, expr: ast.expr) -> bool:
        """`expr.cuda(...)` or `expr.to(<a CUDA device>)`."""
        parent = self.parents.get(id(expr))
        if not (isinstance(parent, ast.Attribute) and parent.value is expr):
            return False
        call = self.parents.get(id(parent))
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr == "cuda":
            return True
        return parent.attr == "to" and bool(call.args) and _cuda_device(call.args[0], self.qualify)

    def _value(self, expr: ast.expr, whole: bool) -> bool:
        """Every use of `expr` (the loaded object when `whole`, else something read out of it) keeps the
        checkpoint a checkpoint (module docstring)."""
        if self._moved_to_cuda(expr):
            return True
        parent = self.parents.get(id(expr))
        if isinstance(parent, ast.Subscript) and parent.value is expr:
            return not isinstance(parent.ctx, ast.Load) or self._value(parent, whole=False)
        if isinstance(parent, ast.Attribute) and parent.value is expr:
            return self._attribute(parent, whole)
        if isinstance(parent, ast.Call):
            if parent.func is expr:
                return False  # `model(x)`: a module
            return self._argument(parent, whole)
        if isinstance(parent, ast.keyword):
            call = self.parents.get(id(parent))
            return isinstance(call, ast.Call) and self._argument(call, whole)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is expr:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return all(self._target(t, whole) for t in targets)
        if isinstance(parent, ast.Compare):
            return not whole or _mapping_test(parent, expr)
        if isinstance(parent, (ast.Delete, ast.FormattedValue)):
            return True
        return not whole  # returned, yielded, put in a container, computed with: a whole object may be a model

    def _attribute(self, attribute: ast.Attribute, whole: bool) -> bool:
        call = self.parents.get(id(attribute))
        called = isinstance(call, ast.Call) and call.func is attribute
        if attribute.attr in MODULE_USES:
            return False
        if attribute.attr in _ENTRY_METHODS and called:
            assert isinstance(call, ast.Call)
            return self._value(call, whole=False)
        if attribute.attr in _MAPPING_METHODS and called:
            return True
        if whole:
            return False  # `ckpt.model`, `ckpt.something()`: not read as a mapping
        if not isinstance(attribute.ctx, ast.Load):
            return True
        return self._value(call if called else attribute, whole=False)  # type: ignore[arg-type]

    def _argument(self, call: ast.Call, whole: bool) -> bool:
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if last == "load_state_dict" or last in _READING_CALLS:
            return True
        if whole:
            return False  # handed on: the callee may train it
        return not any(q.startswith("torch.optim.") for q in self.qualify(func))

    def _target(self, target: ast.expr, whole: bool) -> bool:
        if isinstance(target, ast.Name):
            return self._name(target, whole)
        if isinstance(target, ast.Subscript):
            return not whole  # `sd[k] = ckpt["x"]`: a value put in another mapping (a whole one may be a model)
        if isinstance(target, ast.Attribute) and not whole:
            return self._attribute_reads(target.attr)
        return False  # unpacked, or a whole object stored on an attribute

    def _scope(self, node: ast.AST) -> ast.AST:
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, _SCOPES):
            parent = self.parents.get(id(parent))
        return parent if parent is not None else self.tree

    def _name(self, target: ast.Name, whole: bool) -> bool:
        """Every read of the name in the scope that binds it (the whole file for a module-level one), nested
        functions included; a name visibly moved to CUDA there is accepted."""
        scope = self._scope(target)
        key = (id(scope), target.id, whole)
        if key in self.seen:
            return True
        self.seen.add(key)
        reads = [n for n in fast_walk(scope) if type(n) is ast.Name and n.id == target.id
                 and isinstance(n.ctx, ast.Load)]
        if any(self._moved_to_cuda(n) for n in reads):
            return True
        return all(self._value(n, whole) for n in reads)

    def _attribute_reads(self, attr: str) -> bool:
        """A value read out of the checkpoint stored on `<x>.<attr>`: no read of that attribute anywhere in the
        file is used as a module."""
        key = (0, attr, False)
        if key in self.seen:
            return True
        self.seen.add(key)
        for node in fast_walk(self.tree):
            if type(node) is ast.Attribute and node.attr == attr \
                    and isinstance(node.ctx, ast.Load):
                parent = self.parents.get(id(node))
                if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in MODULE_USES \
                        and not self._moved_to_cuda(node):
                    return False
                if isinstance(parent, ast.Call) and parent.func is node:
                    return False
                if isinstance(parent, (ast.Call, ast.keyword)):
                    call = parent if isinstance(parent, ast.Call) else self.parents.get(id(parent))
                    if isinstance(call, ast.Call) and not self._argument(call, whole=False):
                        return False
        return True
