"""Whether an optimizer updates the bulk of what its training step runs, or only the trainable remainder of a
network the same code froze (GPU201's update-share premise).

A fused optimizer step shortens the update; where the step runs a large frozen network (a UNet or a CLIP text
encoder with LoRA adapters injected, a backbone under a linear probe, a base model peft wraps) and the optimizer
holds only the adapters, the head or a filter over what still requires grad, the update is a sliver of the step
and fusing it cannot pay off. Read in the function that builds the optimizer (or at module level for one built
there): cheap, and the freeze and the optimizer sit together in every training script seen.
"""

from __future__ import annotations

import ast
from typing import Optional

from gpulint.analysis.ast_context import AstContext, dotted
from gpulint.core.torch_api import OPTIMIZER_PARAMS
from gpulint.project.ast_nodes import children as child_nodes
from gpulint.project.facts import (
    ADAPTER_WORDS,
    adapter_test,
    names_given_true,
    not_true,
    parameter_loop,
    turns_off,
)

# callees that hand back the parameters they are given, spread or joined (`itertools.chain(*lora_params)`)
_JOINING = frozenset({"chain", "from_iterable", "list", "tuple"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_MAX_DEPTH = 8


def trains_remainder(ctx: AstContext, node: ast.Call) -> bool:
    """The optimizer built at `node` holds only the trainable remainder of a network its function freezes.

    The function (or the module, for an optimizer built at module level) freezes a whole network: `unet
    .requires_grad_(False)`, or a loop over `model.parameters()`/`named_parameters()` that turns `requires_grad`
    off for every parameter, for every one but a few named ones (`if name not in ["fc.weight", "fc.bias"]`,
    formatted names too) or for every one whose name lacks an adapter word; or the file builds a peft adapter
    (a call resolved into `peft`), which freezes the base model. And every parameter source the optimizer holds
    is the remainder (`_remainder`). A freeze of a part (`model.embeddings.requires_grad_(False)`) freezes no
    network, and an optimizer that also holds another network's parameters (`unet.parameters()` next to a
    frozen VAE) updates the bulk of its step.
    """
    name, _ = OPTIMIZER_PARAMS
    kwargs = ctx.kwargs(node)
    params = kwargs.get(name) if kwargs.passed(name) else next(
        (a for a in node.args if not isinstance(a, ast.Starred)), None)
    if params is None:
        return False
    if not ctx.analysis(_touches_requires_grad) and not ctx.analysis(_builds_peft_adapter):
        return False  # no scope of the file freezes a network (`_Scope.frozen` is empty), and peft builds none
    scope: ast.AST = ctx.enclosing_function(node) or ctx.tree
    read = ctx.analysis(_scopes_read)
    reading = read.get(scope)
    if reading is None:
        reading = read[scope] = _Scope(ctx, scope)
    if not reading.frozen and not reading.peft:
        return False
    return reading.remainder(params, 0)


def _touches_requires_grad(ctx: AstContext) -> bool:
    """The file spells `requires_grad` or `requires_grad_` as an attribute: every freeze `_Scope` looks for does
    (`p.requires_grad = False`, `unet.requires_grad_(False)`), so without one no scope need be read."""
    return any(node.attr in ("requires_grad", "requires_grad_")  # type: ignore[attr-defined]
               for node in ctx.nodes(ast.Attribute))


def _scopes_read(ctx: AstContext) -> dict[ast.AST, _Scope]:
    """Each scope's `_Scope`, read once for the file (it only reads after `__init__`): a function that builds
    several optimizers is read once."""
    return {}


class _Scope:
    """The bindings and freezes of one function body (or the module), nested definitions left out."""

    def __init__(self, ctx: AstContext, scope: ast.AST) -> None:
        self.ctx = ctx
        self.frozen: set[str] = set()  # dotted names of the networks frozen whole
        self.values: dict[str, list[Optional[ast.expr]]] = {}  # name -> what each binding gives (None: unknown)
        self.peft = ctx.analysis(_builds_peft_adapter)
        maybe_true = ctx.analysis(_given_true)
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        for statement in body:
            for child in _own_nodes(statement):
                self._read(child, maybe_true)

    def _read(self, child: ast.AST, maybe_true: set[str]) -> None:
        if isinstance(child, ast.For):
            network = _frozen_by_loop(child, maybe_true)
            if network is not None:
                self.frozen.add(network)
            self._bind(child.target, None)
        elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
            method = child.func.attr
            if method == "requires_grad_" and not_true(child.args[0] if child.args else None, False, maybe_true):
                network = dotted(child.func.value)
                if network is not None:
                    self.frozen.add(network)
            elif method in ("append", "extend", "insert") and isinstance(child.func.value, ast.Name) and child.args:
                added = child.args[-1]
                self.values.setdefault(child.func.value.id, []).append(
                    ast.List(elts=[added]) if method != "extend" else added)
        elif isinstance(child, ast.Assign):
            for target in child.targets:
                self._bind(target, child.value if len(child.targets) == 1 else None)
        elif isinstance(child, (ast.AnnAssign, ast.NamedExpr)):
            self._bind(child.target, child.value)
        elif isinstance(child, ast.AugAssign):
            self._bind(child.target, child.value if isinstance(child.op, ast.Add) else None)
        elif isinstance(child, (ast.With, ast.AsyncWith)):
            for item in child.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, None)
        elif isinstance(child, ast.comprehension):
            self._bind(child.target, None)

    def _bind(self, target: ast.expr, value: Optional[ast.expr]) -> None:
        if isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                # `lora_params, names = inject_trainable_lora(unet)`: the call stands for each element
                self._bind(element, value if isinstance(value, ast.Call) else None)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None)

    def remainder(self, expr: ast.expr, depth: int) -> bool:
        """Every parameter `expr` yields is the trainable remainder of a frozen network: what an adapter call
        returns (a callee named for LoRA, adapters, prompts or prefixes: `inject_trainable_lora(unet)`), the
        parameters of a frozen network that still require grad (`filter(lambda p: p.requires_grad,
        model.parameters())`, `[p for p in ... if p.requires_grad]`; any network where the file builds a peft
        adapter), those of a part of a frozen network (`model.fc.parameters()`) or a model's input embedding
        table (`get_input_embeddings().parameters()`: one tensor); read through lists, param-group dicts
        (their `"params"`), `+`, conditional expressions, `*` spreads, `itertools.chain`/`list`/`tuple`, and
        every binding of a name in the function (`+=`, `.append` and `.extend` included)."""
        if depth > _MAX_DEPTH:
            return False
        deeper = depth + 1
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return all(self.remainder(e, deeper) for e in expr.elts)
        if isinstance(expr, ast.Starred):
            return self.remainder(expr.value, deeper)
        if isinstance(expr, ast.Dict):
            groups = [v for k, v in zip(expr.keys, expr.values) if isinstance(k, ast.Constant) and k.value == "params"]
            return len(groups) == 1 and self.remainder(groups[0], deeper)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.remainder(expr.left, deeper) and self.remainder(expr.right, deeper)
        if isinstance(expr, ast.IfExp):
            return self.remainder(expr.body, deeper) and self.remainder(expr.orelse, deeper)
        if isinstance(expr, ast.Name):
            values = self.values.get(expr.id, [])
            return bool(values) and all(v is not None and self.remainder(v, deeper) for v in values)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self._filtered_comprehension(expr)
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if last is None:
            return False
        if last == "filter" and len(expr.args) == 2 and _requires_grad_lambda(expr.args[0]):
            return self._filtered(expr.args[1])
        if last in _JOINING:
            return bool(expr.args) and not expr.keywords and all(self.remainder(a, deeper) for a in expr.args)
        if last == "parameters" and isinstance(func, ast.Attribute):
            return self._part(func.value)
        return any(word in last.lower() for word in ADAPTER_WORDS)

    def _filtered(self, source: ast.expr) -> bool:
        """The parameters of `source` that still require grad are a remainder: the file builds a peft adapter,
        or `source` is `<network>.parameters()` of a network frozen whole here."""
        if self.peft:
            return True
        return isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
            and source.func.attr in ("parameters", "named_parameters") \
            and _network(source.func.value) in self.frozen

    def _filtered_comprehension(self, expr: "ast.ListComp | ast.GeneratorExp") -> bool:
        """`[p for p in model.parameters() if p.requires_grad]` over a frozen network."""
        if len(expr.generators) != 1 or not isinstance(expr.elt, ast.Name):
            return False
        loop = expr.generators[0]
        if not (isinstance(loop.target, ast.Name) and loop.target.id == expr.elt.id):
            return False
        keeps = any(isinstance(c, ast.Attribute) and c.attr == "requires_grad" and isinstance(c.value, ast.Name)
                    and c.value.id == expr.elt.id for c in loop.ifs)
        return keeps and self._filtered(loop.iter)

    def _part(self, module: ast.expr) -> bool:
        """`<frozen network>.fc.parameters()`, a part of a network frozen whole here, or a model's input
        embedding table (`text_encoder.get_input_embeddings()`: one tensor)."""
        if isinstance(module, ast.Call) and isinstance(module.func, ast.Attribute) \
                and module.func.attr == "get_input_embeddings" and not module.args:
            return True
        whole = _network(module)
        if whole is None:
            return False
        return any(whole.startswith(f"{network}.") for network in self.frozen)


def _network(expr: ast.expr) -> Optional[str]:
    """The dotted name of a module expression, through moves (`model.cuda()`, `model.to(device)`); None where
    it is not a plain attribute chain."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("cuda", "to"):
        return _network(expr.func.value)
    return dotted(expr)


def _own_nodes(statement: ast.stmt) -> list[ast.AST]:
    """The nodes of a statement, definitions nested in it left out (their bindings are their own)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = [statement]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(c for c in child_nodes(current) if not isinstance(c, _NESTED))
    return found


def _frozen_by_loop(loop: ast.For, maybe_true: set[str]) -> Optional[str]:
    """The network a `for ... in <network>.parameters()/named_parameters()` loop freezes whole: every parameter,
    every one but a few named ones, or every one whose name lacks an adapter word."""
    header = parameter_loop(loop)
    if header is None:
        return None
    receiver, name, param = header
    network = _network(receiver)
    for statement in loop.body:
        if turns_off(statement, param, maybe_true):
            return network
        if isinstance(statement, ast.If) and name is not None:
            if not statement.orelse and _all_but_few(statement.test, name) \
                    and any(turns_off(s, param, maybe_true) for s in statement.body):
                return network
            if adapter_test(statement, name, param, maybe_true):
                return network
    return None


def _all_but_few(test: ast.expr, name: str) -> bool:
    """`name not in ["fc.weight", "fc.bias"]`, the names literal or formatted (`'%s.weight' % keyword`,
    f-strings): every parameter but a few."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)
            and isinstance(test.left, ast.Name) and test.left.id == name
            and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set))):
        return False
    names = test.comparators[0].elts
    return 0 < len(names) <= 8 and all(_spelled_name(e) for e in names)


def _spelled_name(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str)
    if isinstance(expr, ast.JoinedStr):
        return True
    return isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) \
        and isinstance(expr.left, ast.Constant) and isinstance(expr.left.value, str)


def _requires_grad_lambda(expr: ast.expr) -> bool:
    """`lambda p: p.requires_grad`."""
    return isinstance(expr, ast.Lambda) and len(expr.args.args) == 1 and isinstance(expr.body, ast.Attribute) \
        and expr.body.attr == "requires_grad" and isinstance(expr.body.value, ast.Name) \
        and expr.body.value.id == expr.args.args[0].arg


def _builds_peft_adapter(ctx: AstContext) -> bool:
    """The file calls into peft (`LoraConfig(...)`, `get_peft_model(model, config)`): peft freezes the base
    model and leaves the adapters trainable."""
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        qualified = ctx.qualname(call.func)
        if qualified is not None and (qualified == "peft" or qualified.startswith("peft.")):
            return True
    return False


def _given_true(ctx: AstContext) -> set[str]:
    return names_given_true(ctx.tree)
