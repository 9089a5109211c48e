"""A Dataset class whose items are only token ids: what a tokenizer makes of text, cut, cast or padded.

Such items are 8 bytes a token (int64 `input_ids`, `labels`, an `attention_mask`): a micro-batch of a few
KB to ~100 KB, copied to the GPU in microseconds whether its memory is pinned or not, against the forward
pass of the model those tokens feed (lit-gpt's SFTDataset, blind18: GPU101 said "true but worth nothing").

Read from CPython's `ast` for project/facts.py (`ClassFacts.token_ids`), so the fact travels to the files
that import the class. Evidence, never a guess: every value an item holds (what `__getitem__` returns or
`__iter__` yields, through the names and `self.` attributes it is built from and the class's own methods it
calls) must come from a tokenizer call (a callee spelled with "tokeniz"/"tokenis": `self.tokenizer(text)`,
`tokenizer.encode(...)`, `clip.tokenize(...)`), or be taken from one (a key, a slice, a method of it, a tensor
or list built of it, `[bos] + ids`), or be a literal, a length or the item's index; at least one value must
be a tokenizer's. Anything else (an image, a feature read from `self.data`, a parameter of unknown kind, a
value a store puts under a dict key) leaves the class unproven.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Optional, Union

from gpulint.project.loader_flow import own_nodes

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]

_TOKENIZER = re.compile(r"tokeni[sz]", re.IGNORECASE)
# calls that build a tensor, array or list of their arguments (or count them): token ids in, token ids out
_BUILDERS = frozenset({
    "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor", "torch.from_numpy", "torch.stack",
    "torch.cat", "torch.concat", "torch.full_like", "torch.ones_like", "torch.zeros_like",
    "torch.nn.utils.rnn.pad_sequence", "torch.nn.functional.pad", "numpy.array", "numpy.asarray",
    "numpy.concatenate",
})
_BUILTINS = frozenset({"list", "tuple", "dict", "min", "max", "sorted", "reversed", "range", "enumerate", "zip"})
_SCALARS = frozenset({"len", "int", "float", "bool"})  # one number, whatever they are handed
# keywords of those calls that say how, not what: `torch.tensor(ids, dtype=torch.long)`
_OPTIONS = frozenset({"dtype", "device", "layout", "requires_grad", "batch_first", "dim", "axis"})
# list methods that add their argument to the list (`ids.append(eos)`, `self.examples.append(encoded)`)
_ADDS = frozenset({"append", "extend", "insert"})
TOKEN, SMALL = 2, 1  # a tokenizer's output (or taken from one); a literal, a length, an index
Kind = Optional[int]  # None: not shown to be either
_DEPTH = 3  # how many of the class's methods (and attribute hops) one value is followed through


def _join(kinds: list[Kind]) -> Kind:
    """Every part must be known: token ids if any part is, else small."""
    if any(k is None for k in kinds):
        return None
    return TOKEN if TOKEN in kinds else SMALL


def _spelled(func: ast.expr) -> str:
    """A dotted name as written (`self.tokenizer.encode`); "" for any other expression."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    return ".".join([func.id, *reversed(parts)]) if isinstance(func, ast.Name) else ""


def _subscripted(target: ast.expr) -> ast.expr:
    """`x` of `x[i]`, `x[i][j]`, `x[:n]`."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target


def _element_store(target: ast.Subscript) -> bool:
    """A store into elements of a tensor or list (`labels[:n] = ignore`, `ids[0] = bos`, `y[y == pad] = -100`):
    its size and dtype stay. A key that may name a new dict entry (a string, a name) is no such store."""
    index = target.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(isinstance(p, (ast.Slice, ast.Compare)) or (isinstance(p, ast.Constant) and type(p.value) is int)
               for p in parts)


class _Function:
    """The values each local name of one method, and each `self.` attribute it sets, is bound to
    (flow-insensitively: every binding counts)."""

    def __init__(self, fn: FunctionNode) -> None:
        self.fn = fn
        params = fn.args.posonlyargs + fn.args.args
        self.me = params[0].arg if params else None
        self.index = params[1].arg if fn.name in ("__getitem__", "__getitems__") and len(params) > 1 else None
        self.values: dict[str, list[ast.expr]] = {}  # plain bindings, and `for x in <expr>` targets' sources
        self.unknown: set[str] = set()  # bound some other way (`with ... as x`)
        self.stores: dict[str, list[ast.expr]] = {}  # `x[k] = v`, `x.append(v)`: values that join x's
        self.attributes: dict[str, list[ast.expr]] = {}  # `self.x = v`, `self.x[k] = v`, `self.x.append(v)`
        self.outputs: list[Optional[ast.expr]] = []  # returned or yielded
        for node in own_nodes(fn.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._part_of(node.target, node.iter)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self.unknown |= {n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ADDS \
                    and node.args:
                self._store(_subscripted(node.func.value), node.args[-1])
            elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
                self.outputs.append(node.value)

    def own_attribute(self, expr: ast.AST) -> Optional[str]:
        """`x` of `self.x`."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self.me:
            return expr.attr
        return None

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        attr = self.own_attribute(target)
        if isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).append(value)
        elif attr is not None:
            self.attributes.setdefault(attr, []).append(value)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
                for part, item in zip(target.elts, value.elts):
                    self._bind(part, item)
            else:
                self._part_of(target, value)
        elif isinstance(target, ast.Subscript) and not _element_store(target):
            self._store(_subscripted(target), value)

    def _part_of(self, target: ast.expr, source: ast.expr) -> None:
        """Names (and `self.` attributes) bound to a part of `source` (an element, an unpacked item), judged
        as `source` itself is: a part of token ids is token ids."""
        for node in ast.walk(target):
            attr = self.own_attribute(node)
            if isinstance(node, ast.Name):
                self.values.setdefault(node.id, []).append(source)
            elif attr is not None:
                self.attributes.setdefault(attr, []).append(source)

    def _store(self, base: ast.expr, value: ast.expr) -> None:
        attr = self.own_attribute(base)
        if isinstance(base, ast.Name):
            self.stores.setdefault(base.id, []).append(value)
        elif attr is not None:
            self.attributes.setdefault(attr, []).append(value)


class _TokenItems:
    """Judges the values of one class's methods (see the module's docstring)."""

    def __init__(self, cls: ast.ClassDef, qualified: Callable[[ast.AST], set[str]]) -> None:
        self.qualified = qualified
        self.methods = {n.name: _Function(n) for n in cls.body
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        # `self.x` as every method of the class sets it, each value with the method it is read in
        self.attributes: dict[str, list[tuple[_Function, ast.expr]]] = {}
        for function in self.methods.values():
            for attr, values in function.attributes.items():
                self.attributes.setdefault(attr, []).extend((function, v) for v in values)

    def items(self) -> bool:
        """Every item `__getitem__` returns (or `__iter__` yields) is token ids."""
        item = self.methods.get("__getitem__") or self.methods.get("__iter__")
        if item is None or not item.outputs:
            return False
        return self._outputs(item, 0) == TOKEN

    def _outputs(self, function: _Function, depth: int) -> Kind:
        return _join([self._expr(function, v, depth) if v is not None else SMALL for v in function.outputs])

    def _name(self, function: _Function, name: str, depth: int, seen: frozenset[str]) -> Kind:
        if name in function.unknown:
            return None
        if name in seen:
            return SMALL  # `ids = ids[:n]`: a name built from itself adds nothing to what it was
        kinds: list[Kind] = [SMALL] if name == function.index else []
        values = function.values.get(name, [])
        if not values and not kinds:
            return None  # a parameter, a global, a builtin: not shown
        inner = seen | {name}
        kinds += [self._expr(function, v, depth, inner) for v in values + function.stores.get(name, [])]
        return _join(kinds)

    def _attribute(self, attr: str, depth: int) -> Kind:
        """`self.x`: what every method of the class sets it to (`self.ids = tokenizer(texts)` in `__init__`)."""
        values = self.attributes.get(attr, [])
        if not values or depth >= _DEPTH:
            return None
        return _join([self._expr(function, value, depth + 1) for function, value in values])

    def _expr(self, function: _Function, expr: ast.expr, depth: int, seen: frozenset[str] = frozenset()) -> Kind:
        def part(node: ast.expr) -> Kind:
            return self._expr(function, node, depth, seen)

        if isinstance(expr, ast.Constant):
            return SMALL
        if isinstance(expr, ast.Name):
            return self._name(function, expr.id, depth, seen)
        if isinstance(expr, ast.Attribute):
            if _TOKENIZER.search(_spelled(expr)):
                return TOKEN  # `tokenizer.eos_token_id`, `self.tokenizer.pad_token_id`
            attr = function.own_attribute(expr)
            if attr is not None:
                return self._attribute(attr, depth)
            return TOKEN if part(expr.value) == TOKEN else None  # `enc.input_ids`, `encoding.ids`
        if isinstance(expr, (ast.Subscript, ast.Starred)):
            return part(expr.value)  # a key, an element or a slice of token ids
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return _join([part(e) for e in expr.elts])
        if isinstance(expr, ast.Dict):
            return _join([part(v) for v in expr.values])
        if isinstance(expr, ast.BinOp):
            return _join([part(expr.left), part(expr.right)])  # `[bos] + ids + [eos]`, `[pad] * (n - len(ids))`
        if isinstance(expr, ast.UnaryOp):
            return part(expr.operand)
        if isinstance(expr, ast.Compare):  # `ids == pad_id`: a mask the size of what it compares
            return _join([part(expr.left), *(part(c) for c in expr.comparators)])
        if isinstance(expr, ast.BoolOp):
            return _join([part(v) for v in expr.values])
        if isinstance(expr, ast.IfExp):
            return _join([part(expr.body), part(expr.orelse)])
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return part(expr.elt)  # its targets are bound to the iterated value (see `_Function`)
        if isinstance(expr, ast.DictComp):
            return _join([part(expr.key), part(expr.value)])
        if isinstance(expr, ast.Call):
            return self._call(function, expr, depth, seen)
        return None

    def _call(self, function: _Function, call: ast.Call, depth: int, seen: frozenset[str]) -> Kind:
        func = call.func
        if _TOKENIZER.search(_spelled(func)):
            return TOKEN  # `self.tokenizer(text)`, `tokenizer.encode(...)`, `clip.tokenize(...)`
        if isinstance(func, ast.Name) and func.id in _SCALARS:
            return SMALL
        attr = function.own_attribute(func)
        if attr is not None:  # a method of the class: what it returns
            helper = self.methods.get(attr)
            if helper is None or helper is function or depth >= _DEPTH:
                return None
            return self._outputs(helper, depth + 1)
        if isinstance(func, ast.Attribute) and self._expr(function, func.value, depth, seen) == TOKEN:
            return TOKEN  # `ids.clone()`, `.type(torch.int64)`, `.squeeze(0)`, `enc.items()`
        builder = bool(self.qualified(func) & _BUILDERS) or (isinstance(func, ast.Name) and func.id in _BUILTINS)
        if not builder:
            return None
        arguments = list(call.args) + [k.value for k in call.keywords if k.arg not in _OPTIONS]
        return _join([self._expr(function, a, depth, seen) for a in arguments])


def yields_token_ids(cls: ast.ClassDef, qualified: Callable[[ast.AST], set[str]]) -> bool:
    """The class's items are token ids only (see the module's docstring): a batch of them is too small for
    pinned memory to pay off."""
    return _TokenItems(cls, qualified).items()
