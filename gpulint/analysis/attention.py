"""Hand-written attention on CPython's `ast`: `softmax(q @ kᵀ · scale + mask) [dropout] @ v` (GPU403).

A chain is read backwards from the product with the values (`w @ v`, `torch.matmul(w, v)`, an
`einsum`): through an optional dropout, a softmax over the last dimension, optional masks and
scale factors, down to the scores `q @ k.transpose(-2, -1)` (or an `einsum` of q and k). Each
operand may be written inline or held in a name assigned earlier in the same block (the last
assignment before its use; `x *= s` counts). What the chain does with the scores (scale, mask,
dropout) decides how `F.scaled_dot_product_attention` can replace it, and anything gpulint cannot
map onto it exactly (a mask other than a visible causal `tril`, a cast, an in-place change, a
step under a condition) leaves it a report without a fix (`blockers`). A chain whose attention
weights leave the method (returned, stored on self) is kept with `kept` set (a report without a fix:
the fused kernel fits the calls that do not read them); one whose weights feed another computation
(a second product, a loss term, an in-place change, a logging call) is not reported: the fused
kernel never materialises them. `torch.bmm` chains are read as 3-D `(B*H, T, D)`.

Pure functions over `ast` and a qualified-name resolver, so the rule and verify can share them.
"""

from __future__ import annotations

import ast
from dataclasses import field, replace
from typing import Callable, Iterator, Optional, Union

from gpulint.analysis.ast_context import AstNames, arg, keyword_args
from gpulint.core.torch_api import (
    BMM_FUNCTIONS,
    DROPOUT_FUNCTIONS,
    DROPOUT_INPLACE,
    DROPOUT_MODULES,
    DROPOUT_P,
    DROPOUT_TRAINING,
    EINSUM_FUNCTIONS,
    FINFO,
    FUSED_ATTENTION_PACKAGES,
    MATMUL_FUNCTIONS,
    ONES_FUNCTIONS,
    SDPA_FUNCTIONS,
    SOFTMAX_DIM,
    SOFTMAX_FUNCTIONS,
    SOFTMAX_MODULES,
    TRANSPOSE_FUNCTIONS,
    TRIL_FUNCTIONS,
)
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.facts import FUSED_OPTION
from gpulint.records import dataclass

# a class that calls one of these already has a fused path: its hand-written attention is the fallback
FUSED_ATTENTION_TEXT = ("scaled_dot_product_attention", "memory_efficient_attention", "flash_attn")
# casts around a softmax: kept in the chain, but SDPA computes in the inputs' dtype (no fix)
_CASTS = frozenset({"float", "half", "bfloat16", "double", "type_as", "to", "type"})
# shape-only steps a causal mask buffer may go through after torch.tril(torch.ones(n, n))
_SHAPE_METHODS = frozenset({"view", "reshape", "unsqueeze", "bool", "to", "int", "long", "float", "byte",
                            "type_as", "expand", "contiguous"})

NO_MASK, CAUSAL, OTHER_MASK = "none", "causal", "other"


@dataclass(frozen=True)
class Attention:
    """One hand-written attention chain in a method of an nn.Module class."""

    output: ast.expr  # `w @ v` (or the matmul/einsum call): what the fix replaces
    statement: ast.stmt  # the statement holding it
    method: Union[ast.FunctionDef, ast.AsyncFunctionDef]
    q: ast.expr
    k: ast.expr
    v: ast.expr
    mask: str  # NO_MASK, CAUSAL or OTHER_MASK
    scale: Optional[str]  # the code for `scale=`; None: 1/sqrt(head dim), SDPA's default
    dropout: Optional[str]  # the code for `dropout_p=`; None: no dropout
    chain: tuple[ast.stmt, ...]  # statements of the block that only compute the weights (the fix removes them)
    blockers: tuple[str, ...]  # why the chain cannot be replaced as written (the report's note)
    kept: Optional["KeptWeights"] = None  # the weights leave the method (returned, stored on self): report only


@dataclass(frozen=True)
class KeptWeights:
    """How the attention weights leave the method, the only other use they have."""

    how: str  # RETURNED or STORED
    flag: Optional[str]  # the code of the test that already says when they are read (`self.vis`), if one does


RETURNED, STORED = "returned", "stored"
# calls that copy the weights out unchanged (`self.attn_map = attn.detach()`)
_COPY_METHODS = frozenset({"detach", "cpu", "clone"})


@dataclass(frozen=True)
class _Trace:
    """What reading one operand backwards found so far."""

    limit: int  # statements of the block before this index may define the names read
    chain: tuple[int, ...] = ()  # indices of the statements read
    names: tuple[tuple[ast.Name, bool], ...] = ()  # Name loads the chain consumed, and whether after the softmax
    blockers: tuple[str, ...] = ()

    def blocked(self, why: str) -> "_Trace":
        return replace(self, blockers=self.blockers + (why,))


@dataclass(frozen=True)
class _Scores:
    q: ast.expr
    k: ast.expr
    einsum_layout: bool = True  # an einsum whose subscripts are SDPA's (..., L, E) x (..., S, E) -> (..., L, S)
    negative_transpose: bool = True  # k.transpose(-2, -1): the last two dimensions whatever the rank


@dataclass
class _Pre:
    """The scores, and what the chain does to them before the softmax."""

    scores: _Scores
    trace: _Trace
    factors: list[tuple[str, ast.expr]] = field(default_factory=list)  # ("*", s) / ("/", d)
    masks: list[tuple[str, ast.expr]] = field(default_factory=list)  # ("fill", call) / ("add", expr)
    scaled_after_add: bool = False


@dataclass(frozen=True)
class ClassInit:
    """What `__init__` binds on self: attribute -> value (`self.x = ...`, `register_buffer("x", ...)`)."""

    attributes: dict[str, ast.expr]


def class_init(cls: ast.ClassDef) -> ClassInit:
    found: dict[str, ast.expr] = {}
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef) or method.name != "__init__" or not method.args.args:
            continue
        me = method.args.args[0].arg
        for node in walk_nodes(method):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if _self_attribute(target, me) is not None:
                    found[_self_attribute(target, me) or ""] = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "register_buffer" and _is_name(node.func.value, me) and len(node.args) >= 2:
                name = node.args[0]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    found[name.value] = node.args[1]
    return ClassInit(found)


def has_fused_path(class_text: str) -> bool:
    return any(needle in class_text for needle in FUSED_ATTENTION_TEXT)


def attention_in_class(cls: ast.ClassDef, names: AstNames, segment: Callable[[ast.AST], str]) -> list[Attention]:
    """Every hand-written attention chain in the methods of `cls` whose weights are read by nothing else than
    the product with the values, or only handed out (returned, stored on self: `Attention.kept`)."""
    init = class_init(cls)
    found: list[Attention] = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        reader = _Reader(method, init, names, segment)
        for block in _blocks(method):
            for index, statement in enumerate(block):
                for output in _outputs(statement):
                    site = reader.read(block, index, output)
                    if site is not None:
                        found.append(site)
    return found


# ------------------------------------------------------------------------------------------------
# a model option that keeps the fused kernel off by default (`flash=False`)


@dataclass(frozen=True)
class FusedOption:
    """`if self.<attribute>:` choosing a fused kernel over a hand-written chain, where `__init__` sets the
    attribute from an option: a parameter defaulting to False, or a field read from a config object. Whether
    anything turns the option on is the project's to say (ProjectView.option_values)."""

    option: str  # as callers spell it: the parameter (`flash`) or the config field (`flash_attn`)
    config: bool  # a field of a config object (its default is in the config class), not a parameter
    node: ast.expr  # the parameter's default (`False`), or the config read (`config.flash_attn`)
    position: Optional[int]  # the parameter's index among the positional arguments after self; None: keyword-only
    attribute: str  # `self.<attribute>`, which a script may also set on the built model (`model.attn.flash = True`)
    branch: ast.If  # the test that chooses the kernel
    site: Attention  # the hand-written chain that runs while the option is off


@dataclass(frozen=True)
class _Source:
    option: str
    config: bool
    node: ast.expr
    position: Optional[int]


def fused_options(cls: ast.ClassDef, names: AstNames, sites: list[Attention]) -> list[FusedOption]:
    """Options of `cls` that choose between a fused kernel (SDPA, xFormers, flash-attn) and one of its
    hand-written chains `sites` (found with `attention_in_class`, which needs no fused-path test), one each."""
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"
                 and m.args.args), None)
    if init is None or not sites:
        return []
    sources = _option_sources(cls, init, names)
    found: dict[str, FusedOption] = {}
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        me = method.args.args[0].arg
        for block in _blocks(method):
            for index, statement in enumerate(block):
                if not isinstance(statement, ast.If):
                    continue
                tested = _tested_attribute(statement.test, me)
                if tested is None or tested[0] not in sources:
                    continue
                attribute, negated = tested
                on, off = (statement.orelse, statement.body) if negated else (statement.body, statement.orelse)
                if not off and on and isinstance(on[-1], (ast.Return, ast.Raise)):
                    off = block[index + 1:]  # `if self.flash: return sdpa(...)`, the hand-written code after
                if not _calls_fused_kernel(on, names, _methods_called(on, me, cls)):
                    continue
                inside = {id(n) for s in off for n in walk_nodes(s)}
                site = next((s for s in sites if s.method is method and id(s.statement) in inside), None)
                source = sources[attribute]
                if site is not None and source.option not in found:
                    found[source.option] = FusedOption(source.option, source.config, source.node, source.position,
                                                       attribute, statement, site)
    return list(found.values())


def _option_sources(cls: ast.ClassDef, init: ast.FunctionDef, names: AstNames) -> dict[str, _Source]:
    """`self.flash = flash` (a parameter defaulting to False), `self.flash = config.flash_attn`, either one
    `and`-ed with `hasattr(F, "scaled_dot_product_attention")`: attribute -> where its value comes from. Only
    options named like a fused-attention switch (the project facts record the values callers give those),
    set once in the class, from a parameter `__init__` does not rebind."""
    me = init.args.args[0].arg
    positional = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    defaults: dict[str, Optional[ast.expr]] = {}
    all_positional = init.args.posonlyargs + init.args.args
    for offset, default in enumerate(init.args.defaults):
        defaults[all_positional[len(all_positional) - len(init.args.defaults) + offset].arg] = default
    for kwonly, kw_default in zip(init.args.kwonlyargs, init.args.kw_defaults):
        defaults[kwonly.arg] = kw_default
    rebound = {n.id for n in walk_nodes(init) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assigned: dict[str, int] = {}
    for node in walk_nodes(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                assigned[target.attr] = assigned.get(target.attr, 0) + 1
    out: dict[str, _Source] = {}
    for statement in init.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        attribute = _self_attribute(statement.targets[0], me)
        if attribute is None or assigned.get(attribute) != 1:
            continue
        value = statement.value
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
            rest = [v for v in value.values if not _tests_for_sdpa(v, names)]
            value = rest[0] if len(rest) == 1 else value
        if isinstance(value, ast.Name) and value.id in defaults and value.id not in rebound \
                and FUSED_OPTION.search(value.id) and _is_false(defaults[value.id] or ast.Constant(None)):
            position = positional.index(value.id) if value.id in positional else None
            out[attribute] = _Source(value.id, False, defaults[value.id] or value, position)
        elif isinstance(value, ast.Attribute) and FUSED_OPTION.search(value.attr) \
                and _root_name(value) in defaults.keys() | set(positional) and _root_name(value) not in rebound:
            out[attribute] = _Source(value.attr, True, value, None)
    return out


def _tests_for_sdpa(node: ast.expr, names: AstNames) -> bool:
    """`hasattr(F, "scaled_dot_product_attention")` (the torch 2.0 test nanoGPT writes)."""
    return isinstance(node, ast.Call) and _is_name(node.func, "hasattr") and names.qualname(node.func) is None \
        and len(node.args) == 2 and _string(node.args[1]) == "scaled_dot_product_attention"


def _tested_attribute(test: ast.expr, me: str) -> Optional[tuple[str, bool]]:
    """`self.flash` -> ("flash", False); `not self.flash` -> ("flash", True)."""
    negated = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    attribute = _self_attribute(test, me)
    return (attribute, negated) if attribute is not None else None


def _methods_called(statements: list[ast.stmt], me: str, cls: ast.ClassDef) -> list[ast.stmt]:
    """The bodies of the class's own methods the statements call (`return self.flash_attn(q, k, v)`)."""
    methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    called: set[str] = set()
    for statement in statements:
        for node in walk_nodes(statement):
            name = _self_attribute(node.func, me) if isinstance(node, ast.Call) else None
            if name in methods:
                called.add(name)
    return [statement for name in sorted(called) for statement in methods[name].body]


def _calls_fused_kernel(statements: list[ast.stmt], names: AstNames, helpers: list[ast.stmt]) -> bool:
    """A call of SDPA, xFormers or flash-attn in the statements, or in the class's methods they call."""
    for statement in (*statements, *helpers):
        for node in walk_nodes(statement):
            if isinstance(node, ast.Call):
                name = names.qualname(node.func)
                if name is not None and (name in SDPA_FUNCTIONS or name.split(".", 1)[0] in FUSED_ATTENTION_PACKAGES):
                    return True
    return False


def _root_name(node: ast.expr) -> Optional[str]:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# ------------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, method: Union[ast.FunctionDef, ast.AsyncFunctionDef], init: ClassInit, names: AstNames,
                 segment: Callable[[ast.AST], str]) -> None:
        self.method = method
        self.me = method.args.args[0].arg
        self.init = init
        self.names = names
        self.qualname = names.qualname
        self.segment = segment
        self.block: list[ast.stmt] = []
        self._parent_map: Optional[dict[int, ast.AST]] = None
        self.three_d = False  # the product is torch.bmm: every tensor of the chain is (B*H, T, D)

    # -- the chain, read backwards from the product with the values -----------------------------------
    def read(self, block: list[ast.stmt], index: int, output: ast.expr) -> Optional[Attention]:
        self.block = block
        self.three_d = isinstance(output, ast.Call) and self.qualname(output.func) in BMM_FUNCTIONS
        operands = self._product(output)
        if operands is None:
            return None
        weights, v, einsum_spec = operands
        trace = _Trace(limit=index)
        expr, trace = self._resolve(weights, trace, after_softmax=True)
        dropout: Optional[str] = None
        dropped = self._dropout(expr)
        if dropped is not None:
            inner, dropout = dropped
            if dropout is None:
                trace = trace.blocked("a dropout gpulint cannot read")
            expr, trace = self._resolve(inner, trace, after_softmax=True)
        expr, trace = self._casts(expr, trace, after_softmax=True)
        inner_softmax = self._softmax(expr)
        if inner_softmax is None:
            return None
        inner, exact = inner_softmax
        if not exact:
            trace = trace.blocked("the softmax casts its input (SDPA computes in the inputs' dtype)")
        pre = self._pre_softmax(inner, trace)
        if pre is None:
            return None
        trace = pre.trace
        if einsum_spec is not None and not _sdpa_output_spec(einsum_spec):
            trace = trace.blocked("the einsums' layout is not (..., T, head_dim): move the heads first")
        if not pre.scores.einsum_layout:
            trace = trace.blocked("the einsums' layout is not (..., T, head_dim): move the heads first")
        if not pre.scores.negative_transpose:
            trace = trace.blocked("the key is transposed by positive dimensions; SDPA transposes the last two")
        kept: Optional[KeptWeights] = None
        reads = self._weights_read_elsewhere(trace, block[index], after_softmax=True)
        if reads:
            kept = self._kept(reads)
            if kept is None:
                return None  # the weights feed another computation: the fused kernel never makes them
        if self._weights_read_elsewhere(trace, block[index], after_softmax=False):
            trace = trace.blocked("the scores are also read or changed in place elsewhere")
        mask, trace = self._mask(pre, trace)
        scale = self._scale(pre)
        if pre.scaled_after_add:
            trace = trace.blocked("the scores are scaled after an additive mask")
        chain = tuple(block[i] for i in sorted(set(trace.chain)))
        trace = self._movable(trace, chain, block[index], pre.scores.q, pre.scores.k)
        return Attention(output=output, statement=block[index], method=self.method, q=pre.scores.q,
                         k=pre.scores.k, v=v, mask=mask, scale=scale, dropout=dropout, chain=chain,
                         blockers=tuple(dict.fromkeys(trace.blockers)), kept=kept)

    def _product(self, node: ast.expr) -> Optional[tuple[ast.expr, ast.expr, Optional[str]]]:
        """`w @ v`, `torch.matmul(w, v)` or `torch.einsum(spec, w, v)`: (w, v, spec)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return node.left, node.right, None
        if isinstance(node, ast.Call) and not node.keywords:
            name = self.qualname(node.func)
            if (name in MATMUL_FUNCTIONS or (self.three_d and name in BMM_FUNCTIONS)) and len(node.args) == 2:
                return node.args[0], node.args[1], None
            if name in EINSUM_FUNCTIONS and len(node.args) == 3:
                spec = _string(node.args[0])
                if spec is not None:
                    return node.args[1], node.args[2], spec
        return None

    def _resolve(self, expr: ast.expr, trace: _Trace, after_softmax: bool) -> tuple[ast.expr, _Trace]:
        """Follow names to their last assignment in the block before the use (`x *= s` included)."""
        while isinstance(expr, ast.Name):
            found = self._assignment(expr.id, trace.limit)
            if found is None:
                return expr, trace
            index, value, conditional = found
            trace = replace(trace, limit=index, chain=trace.chain + (index,),
                            names=trace.names + ((expr, after_softmax),))
            if conditional:
                trace = trace.blocked(f"`{expr.id}` is changed under a condition")
            expr = value
        return expr, trace

    def _assignment(self, name: str, limit: int) -> Optional[tuple[int, ast.expr, bool]]:
        conditional = False
        for index in range(limit - 1, -1, -1):
            statement = self.block[index]
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and _is_name(statement.targets[0], name):
                return index, statement.value, conditional
            if isinstance(statement, ast.AugAssign) and _is_name(statement.target, name):
                value = ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=statement.op, right=statement.value)
                return index, ast.copy_location(value, statement), conditional
            if name in _bound_names(statement):
                if isinstance(statement, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                    conditional = True
                    continue
                return None  # unpacked, imported, ...: not followed
        return None

    def _casts(self, expr: ast.expr, trace: _Trace, after_softmax: bool) -> tuple[ast.expr, _Trace]:
        while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _CASTS:
            trace = trace.blocked("the chain casts the scores or weights (SDPA computes in the inputs' dtype)")
            expr, trace = self._resolve(expr.func.value, trace, after_softmax)
        return expr, trace

    def _dropout(self, expr: ast.expr) -> Optional[tuple[ast.expr, Optional[str]]]:
        """(input, dropout_p code) for `self.drop(w)` (an nn.Dropout of __init__) or `F.dropout(w, p, training)`."""
        if not isinstance(expr, ast.Call) or not expr.args:
            return None
        attribute = _self_attribute(expr.func, self.me)
        if attribute is not None:
            built = self.init.attributes.get(attribute)
            if isinstance(built, ast.Call) and self.qualname(built.func) in DROPOUT_MODULES:
                if len(expr.args) != 1 or expr.keywords:
                    return expr.args[0], None
                return expr.args[0], f"{self.me}.{attribute}.p if {self.me}.training else 0.0"
            return None
        if self.qualname(expr.func) not in DROPOUT_FUNCTIONS:
            return None
        p = self._argument(expr, *DROPOUT_P)
        training = self._argument(expr, *DROPOUT_TRAINING)
        inplace = self._argument(expr, *DROPOUT_INPLACE)
        if any(k.arg is None for k in expr.keywords) or (inplace is not None and not _is_false(inplace)):
            return expr.args[0], None
        p_code = self._code(p) if p is not None else "0.5"
        if training is None:
            return expr.args[0], p_code
        if isinstance(p, ast.IfExp):
            p_code = f"({p_code})"
        return expr.args[0], f"{p_code} if {self._code(training)} else 0.0"

    def _softmax(self, expr: ast.expr) -> Optional[tuple[ast.expr, bool]]:
        """(input, exact) for a softmax over the last dimension; exact: no `dtype=`."""
        if not isinstance(expr, ast.Call):
            return None
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "softmax" and self.qualname(func) is None \
                and not _is_name(func.value, self.me):
            # `x.softmax(dim=-1)`: a tensor method (not `torch.softmax`, not the module's own `self.softmax`)
            if _self_attribute(func.value, self.me) is not None:
                return None
            dim = self._argument(expr, "dim", 0)
            return (func.value, _exact_softmax(expr)) if self._last_dim(dim) else None
        attribute = _self_attribute(func, self.me)
        if attribute is not None:
            built = self.init.attributes.get(attribute)
            if isinstance(built, ast.Call) and self.qualname(built.func) in SOFTMAX_MODULES \
                    and len(expr.args) == 1 and not expr.keywords and self._last_dim(self._argument(built, "dim", 0)):
                return expr.args[0], True
            return None
        if self.qualname(func) in SOFTMAX_FUNCTIONS and expr.args:
            dim = self._argument(expr, *SOFTMAX_DIM)
            return (expr.args[0], _exact_softmax(expr)) if self._last_dim(dim) else None
        return None

    def _last_dim(self, dim: Optional[ast.AST]) -> bool:
        """-1, or 2 in a torch.bmm chain (3-D)."""
        return _last_dim(dim) or (self.three_d and _int(dim) == 2)

    def _pre_softmax(self, expr: ast.expr, trace: _Trace) -> Optional[_Pre]:
        """Read scale factors and masks down to the scores."""
        expr, trace = self._resolve(expr, trace, after_softmax=False)
        expr, trace = self._casts(expr, trace, after_softmax=False)
        scores = self._scores(expr)
        if scores is not None:
            return _Pre(scores, trace)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "masked_fill" \
                and len(expr.args) == 2 and not expr.keywords:
            pre = self._pre_softmax(expr.func.value, trace)
            if pre is not None:
                pre.masks.append(("fill", expr))
            return pre
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div, ast.Add)):
            pre = self._pre_softmax(expr.left, trace)
            other = expr.right
            if pre is None and not isinstance(expr.op, ast.Div):
                pre = self._pre_softmax(expr.right, trace)
                other = expr.left
            if pre is None:
                return None
            if isinstance(expr.op, ast.Add):
                pre.masks.append(("add", other))
            else:
                pre.factors.append(("*" if isinstance(expr.op, ast.Mult) else "/", other))
                if any(kind == "add" for kind, _ in pre.masks):
                    pre.scaled_after_add = True
            return pre
        return None

    def _scores(self, expr: ast.expr) -> Optional[_Scores]:
        """`q @ kᵀ`, `torch.matmul(q, kᵀ)`, or `torch.einsum(spec, q, k)` with two operands."""
        product = self._product(expr)
        if product is None:
            return None
        q, right, spec = product
        if spec is not None:
            return _Scores(q, right, einsum_layout=_sdpa_scores_spec(spec))
        transposed = self._key_transpose(right)
        if transposed is None:
            return None
        k, negative = transposed
        return _Scores(q, k, negative_transpose=negative)

    def _key_transpose(self, expr: ast.expr) -> Optional[tuple[ast.expr, bool]]:
        """`k.transpose(-2, -1)` (True: the last two dimensions), `k.transpose(2, 3)` (False), `k.mT`."""
        if isinstance(expr, ast.Attribute) and expr.attr == "mT":
            return expr.value, True
        if not isinstance(expr, ast.Call) or expr.keywords:
            return None
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "transpose" and len(expr.args) == 2 \
                and self.qualname(expr.func) is None:
            receiver, dims = expr.func.value, expr.args
        elif self.qualname(expr.func) in TRANSPOSE_FUNCTIONS and len(expr.args) == 3:
            receiver, dims = expr.args[0], expr.args[1:]
        else:
            return None
        pair = {_int(d) for d in dims}
        if pair == {-2, -1} or (self.three_d and pair == {1, 2}):
            return receiver, True
        if pair in ({2, 3}, {1, 2}):
            return receiver, False
        return None

    # -- what the chain does to the scores ------------------------------------------------------------
    def _mask(self, pre: _Pre, trace: _Trace) -> tuple[str, _Trace]:
        if not pre.masks:
            return NO_MASK, trace
        if len(pre.masks) == 1 and pre.masks[0][0] == "fill":
            causal = self._causal_fill(pre.masks[0][1], trace)
            if causal is not None:
                return CAUSAL, causal
        return OTHER_MASK, trace.blocked(
            "a mask other than a visible causal tril: pass it as attn_mask= (a boolean attn_mask is True where "
            "attention is allowed)")

    def _causal_fill(self, call: ast.expr, trace: _Trace) -> Optional[_Trace]:
        """`.masked_fill(M[..., :T, :T] == 0, float('-inf'))` with M = torch.tril(torch.ones(n, n)) (a buffer
        of __init__ or a name of the block). Any T that runs is the query and key length (the mask must
        broadcast against the scores), so it equals is_causal=True. The trace, with a local mask's statement
        in the chain when nothing else reads it; None: not that mask."""
        assert isinstance(call, ast.Call)
        condition, fill = call.args
        if not _very_negative(fill, self.qualname):
            return None
        if not (isinstance(condition, ast.Compare) and len(condition.ops) == 1
                and isinstance(condition.ops[0], ast.Eq) and _int(condition.comparators[0]) == 0):
            return None
        source = condition.left
        if isinstance(source, ast.Subscript):
            if not _leading_corner(source.slice):
                return None
            source = source.value
        attribute = _self_attribute(source, self.me)
        if attribute is not None:
            built = self.init.attributes.get(attribute)
            return trace if built is not None and self._tril_of_ones(built) else None
        if not isinstance(source, ast.Name):
            return None
        found = self._assignment(source.id, trace.limit)
        if found is None or found[2] or not self._tril_of_ones(found[1]):
            return None
        reads = [n for n in walk_nodes(self.method) if isinstance(n, ast.Name) and n.id == source.id
                 and isinstance(n.ctx, ast.Load)]
        return replace(trace, chain=trace.chain + (found[0],)) if len(reads) == 1 else trace

    def _tril_of_ones(self, expr: ast.expr) -> bool:
        while True:
            if isinstance(expr, ast.Subscript) and _only_new_axes(expr.slice):
                expr = expr.value
            elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                    and expr.func.attr in _SHAPE_METHODS and self.qualname(expr.func) is None:
                expr = expr.func.value
            else:
                break
        if not (isinstance(expr, ast.Call) and self.qualname(expr.func) in TRIL_FUNCTIONS and len(expr.args) == 1):
            return False
        diagonal = [k.value for k in expr.keywords if k.arg == "diagonal"]
        if len(expr.keywords) != len(diagonal) or (diagonal and _int(diagonal[0]) != 0):
            return False
        ones = expr.args[0]
        return isinstance(ones, ast.Call) and self.qualname(ones.func) in ONES_FUNCTIONS

    def _scale(self, pre: _Pre) -> Optional[str]:
        """The `scale=` code, or None when the factors are 1/sqrt of q's or k's last dimension (SDPA's default)."""
        factors = pre.factors
        if len(factors) == 1 and self._inverse_sqrt_head_dim(factors[0], pre.scores):
            return None
        if not factors:
            return "1.0"
        products = [(self._code(f), f) for kind, f in factors if kind == "*"]
        divisors = [(self._code(f), f) for kind, f in factors if kind == "/"]
        if len(products) == 1 and not divisors:
            return products[0][0]
        code = " * ".join(_atom(text, node) for text, node in products) or "1.0"
        for text, node in divisors:
            code += f" / {_atom(text, node)}"
        return code

    def _inverse_sqrt_head_dim(self, factor: tuple[str, ast.expr], scores: _Scores) -> bool:
        kind, node = factor
        if kind == "/":
            return self._sqrt_head_dim(node, scores)
        # * (1 / sqrt(d)), * d ** -0.5
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _number(node.left) == 1:
            return self._sqrt_head_dim(node.right, scores)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _number(node.right) == -0.5:
            return self._head_dim(node.left, scores)
        return False

    def _sqrt_head_dim(self, node: ast.expr, scores: _Scores) -> bool:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _number(node.right) == 0.5:
            return self._head_dim(node.left, scores)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
                and self.qualname(node.func) in ("math.sqrt", "numpy.sqrt"):
            return self._head_dim(node.args[0], scores)
        return False

    def _head_dim(self, node: ast.expr, scores: _Scores) -> bool:
        """`q.size(-1)`, `k.shape[-1]`, `q.size()[-1]` of the chain's own q or k."""
        tensor: Optional[ast.expr] = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and len(node.args) == 1 and _int(node.args[0]) == -1 and not node.keywords:
            tensor = node.func.value
        elif isinstance(node, ast.Subscript) and _int(node.slice) == -1:
            holder = node.value
            if isinstance(holder, ast.Attribute) and holder.attr == "shape":
                tensor = holder.value
            elif isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute) \
                    and holder.func.attr == "size" and not holder.args:
                tensor = holder.func.value
        if tensor is None:
            return False
        mine = ast.dump(tensor)
        return mine in (ast.dump(scores.q), ast.dump(scores.k))

    # -- whether the chain can be replaced in place ---------------------------------------------------
    def _weights_read_elsewhere(self, trace: _Trace, output_statement: ast.stmt,
                                after_softmax: bool) -> list[ast.Name]:
        """The loads of a name of the chain that the chain itself does not consume, while the name holds the
        chain's value: from the chain's first statement on (an in-place change, a stored or returned copy),
        until something rebinds it after the output."""
        consumed = {id(name) for name, _ in trace.names}
        names = {name.id for name, after in trace.names if after is after_softmax}
        start = _position(self.block[min(trace.chain)]) if trace.chain else _position(output_statement)
        if after_softmax:  # reads before the weights are first held are of the scores (a reused name)
            held = [index for index, (_, after) in zip(trace.chain, trace.names) if after]
            start = _position(self.block[min(held)]) if held else start
        output_end = _end(output_statement)
        stores = _stores_after(self.method, output_statement)
        found: list[ast.Name] = []
        for node in walk_nodes(self.method):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names):
                continue
            where = _position(node)
            if id(node) in consumed or where < start:
                continue  # the chain's own read, or an older value of a reused name
            if where > output_end and any(_position(output_statement) <= s < where for s in stores.get(node.id, [])):
                continue  # rebound by then (`x = attn @ v` reusing a name, a later assignment)
            found.append(node)
        return found

    def _kept(self, reads: list[ast.Name]) -> Optional[KeptWeights]:
        """How the weights leave the method when every other read of them only hands them out: returned
        (alone or in a tuple), stored on self, either one through a copy (`.detach()`), a flag
        (`w if self.vis else None`) or one local name only used that way. None: some read computes with them."""
        parents = self._parents()
        how: set[str] = set()
        flags: list[str] = []
        pending: list[tuple[ast.expr, bool]] = [(read, True) for read in reads]
        while pending:
            node, may_name = pending.pop()
            parent = parents.get(id(node))
            while True:  # through copies and a flag
                if isinstance(parent, ast.Attribute) and parent.attr in _COPY_METHODS:
                    call = parents.get(id(parent))
                    if not (isinstance(call, ast.Call) and call.func is parent and not call.args and not call.keywords):
                        return None
                    node, parent = call, parents.get(id(call))
                elif isinstance(parent, ast.IfExp) and node is not parent.test \
                        and _is_none(parent.orelse if node is parent.body else parent.body):
                    flags.append(self.segment(parent.test) if node is parent.body else "")
                    node, parent = parent, parents.get(id(parent))
                else:
                    break
            if isinstance(parent, ast.Tuple) and isinstance(parent.ctx, ast.Load):
                # `(out, w)` returned, or held in a name that is (`outputs = (ctx, w) if flag else (ctx,)`)
                holder = parents.get(id(parent))
                if isinstance(holder, ast.IfExp) and parent is not holder.test:
                    flags.append(self.segment(holder.test) if parent is holder.body else "")
                    node, parent = holder, parents.get(id(holder))
                elif isinstance(holder, (ast.Return, ast.Assign)):
                    node, parent = parent, holder
            if isinstance(parent, ast.Return):
                how.add(RETURNED)
                continue
            if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node):
                return None
            target = parent.targets[0]
            if _self_attribute(target, self.me) is not None:
                how.add(STORED)
                continue
            if not (may_name and isinstance(target, ast.Name)):
                return None
            held = [n for n in walk_nodes(self.method) if isinstance(n, ast.Name) and n.id == target.id]
            if any(not isinstance(n.ctx, ast.Load) for n in held if n is not target):
                return None  # the name is bound twice: which value a read sees is not followed
            loads = [n for n in held if isinstance(n.ctx, ast.Load)]
            if not loads or any(_position(n) < _position(target) for n in loads):
                return None
            pending.extend((n, False) for n in loads)
        if not how:
            return None
        flag = flags[0] or None if len(set(flags)) == 1 else None  # "": the weights are read when the test fails
        return KeptWeights(RETURNED if RETURNED in how else STORED, flag)

    def _parents(self) -> dict[int, ast.AST]:
        if self._parent_map is None:
            self._parent_map = {id(child): node for node in walk_nodes(self.method)
                                for child in ast.iter_child_nodes(node)}
        return self._parent_map

    def _movable(self, trace: _Trace, chain: tuple[ast.stmt, ...], output_statement: ast.stmt, q: ast.expr,
                 k: ast.expr) -> _Trace:
        """The fix evaluates q, k, the mask and the scale in the output's statement: nothing in between may
        rebind what they read, and the removed statements must stand alone on their lines."""
        if not chain:
            return trace
        first = self.block.index(chain[0])
        last = self.block.index(output_statement)
        read = {n.id for expr in (q, k) for n in walk_nodes(expr) if isinstance(n, ast.Name)}
        chain_names = {t.id for s in chain for t in _targets(s)}
        for statement in self.block[first:last]:
            if statement in chain:
                continue
            if _bound_names(statement) & (read | chain_names):
                return trace.blocked("q or k change between the scores and the output")
        if read & chain_names:
            return trace.blocked("q or k are rebound by the chain")
        lines = [s.lineno for s in self.block]
        for statement in chain:
            if lines.count(statement.lineno) > 1 or not isinstance(statement, (ast.Assign, ast.AugAssign)):
                return trace.blocked("a statement of the chain shares its line")
        return trace

    def _code(self, node: ast.expr) -> str:
        return self.segment(node)

    def _argument(self, call: ast.Call, name: str, position: Optional[int]) -> Optional[ast.expr]:
        return arg(call, name, position, keyword_args(call, self.names))


# ------------------------------------------------------------------------------------------------
# small helpers


def _blocks(function: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list of the function, nested blocks included, not nested functions or classes."""
    stack: list[ast.AST] = [function]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
                stack.extend(s for s in block if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                      ast.ClassDef)))
        for handler in getattr(node, "handlers", ()) or ():
            yield handler.body
            stack.extend(handler.body)


def _outputs(statement: ast.stmt) -> Iterator[ast.expr]:
    """Candidate products with the values in one statement (not in nested blocks or functions)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                              ast.With, ast.Try)):
        return
    for node in walk_nodes(statement):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            yield node
        elif isinstance(node, ast.Call) and len(node.args) in (2, 3):
            yield node


def _bound_names(statement: ast.stmt) -> set[str]:
    out: set[str] = set()
    for node in walk_nodes(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return out


def _targets(statement: ast.stmt) -> list[ast.Name]:
    if isinstance(statement, ast.Assign):
        return [t for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
        return [statement.target]
    return []


def _stores_after(method: ast.AST, statement: ast.stmt) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for node in walk_nodes(method):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _position(node) >= _position(statement):
            out.setdefault(node.id, []).append(_position(node))
    return out


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _end(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _self_attribute(node: ast.AST, me: str) -> Optional[str]:
    if isinstance(node, ast.Attribute) and _is_name(node.value, me):
        return node.attr
    return None


def _string(node: ast.AST) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _int(node: Optional[ast.AST]) -> Optional[int]:
    value = _number(node)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(node: Optional[ast.AST]) -> Optional[Union[int, float]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _last_dim(node: Optional[ast.AST]) -> bool:
    return _int(node) == -1


def _exact_softmax(call: ast.Call) -> bool:
    return not any(k.arg in ("dtype", "_stacklevel") or k.arg is None for k in call.keywords) and len(call.args) <= 2


def _very_negative(node: ast.expr, qualname: Callable[[ast.expr], Optional[str]]) -> bool:
    """-inf in any spelling, a finite fill that underflows exp() (<= -1e4), or torch.finfo(...).min."""
    if isinstance(node, ast.Call) and _is_name(node.func, "float") and len(node.args) == 1:
        return _string(node.args[0]) in ("-inf", "-Inf", "-infinity")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = node.operand
        if isinstance(inner, ast.Call) and _is_name(inner.func, "float") and len(inner.args) == 1:
            return _string(inner.args[0]) in ("inf", "Inf", "infinity")
        if qualname(inner) in ("torch.inf", "math.inf", "numpy.inf"):
            return True
    if isinstance(node, ast.Attribute) and node.attr == "min" and isinstance(node.value, ast.Call) \
            and qualname(node.value.func) in FINFO:
        return True
    value = _number(node)
    return value is not None and value <= -1e4


def _leading_corner(index: ast.expr) -> bool:
    """`[:, :, :T, :T]`, `[..., :T, :T]`, `[:T, :T]`: whole leading dims, the same upper bound on the last two."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    if len(items) < 2:
        return False
    *leading, row, column = items
    for item in leading:
        if isinstance(item, ast.Constant) and item.value is Ellipsis:
            continue
        if not (isinstance(item, ast.Slice) and item.lower is None and item.upper is None and item.step is None):
            return False
    for item in (row, column):
        if not (isinstance(item, ast.Slice) and item.lower is None and item.step is None and item.upper is not None):
            return False
    assert isinstance(row, ast.Slice) and isinstance(column, ast.Slice)
    return ast.dump(row.upper) == ast.dump(column.upper)  # type: ignore[arg-type]


def _only_new_axes(index: ast.expr) -> bool:
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    return all((isinstance(i, ast.Constant) and i.value in (None, Ellipsis))
               or (isinstance(i, ast.Slice) and i.lower is None and i.upper is None and i.step is None) for i in items)


def _atom(code: str, node: ast.expr) -> str:
    """Parenthesised unless it is a name, attribute, call, subscript or number."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)):
        return code
    return f"({code})"


def _einsum_operands(spec: str) -> Optional[tuple[str, str, str]]:
    spec = spec.replace(" ", "")
    if spec.count("->") != 1:
        return None
    inputs, output = spec.split("->")
    parts = inputs.split(",")
    if len(parts) != 2:
        return None
    return parts[0], parts[1], output


def _sdpa_scores_spec(spec: str) -> bool:
    """`...ld,...sd->...ls` (same batch letters on all three): q (..., L, E) and k (..., S, E)."""
    found = _einsum_operands(spec)
    if found is None:
        return False
    a, b, out = found
    if not (len(a) == len(b) == len(out) >= 2) or a[:-2] != b[:-2] or a[:-2] != out[:-2]:
        return False
    row, e, s = a[-2], a[-1], b[-2]
    return b[-1] == e and out[-2:] == row + s and len({row, e, s}) == 3 and not {row, e, s} & set(a[:-2])


def _sdpa_output_spec(spec: str) -> bool:
    """`...ls,...sd->...ld`: weights (..., L, S) times v (..., S, Ev)."""
    found = _einsum_operands(spec)
    if found is None:
        return False
    a, b, out = found
    if not (len(a) == len(b) == len(out) >= 2) or a[:-2] != b[:-2] or a[:-2] != out[:-2]:
        return False
    row, s, d = a[-2], a[-1], b[-1]
    return b[-2] == s and out[-2:] == row + d and len({row, s, d}) == 3 and not {row, s, d} & set(a[:-2])
