"""A step's loss takes `log(1 - p)` of what a project model returns, and that model's `forward` ends in a sigmoid.

A link predictor returns `torch.sigmoid(x)`; the training step computes `-torch.log(1 - neg_out + 1e-15)`
of it (ogbl_collab's LinkPredictor, twentieth blind reading). Under autocast the sigmoid is 16-bit and
rounds to 1.0 from a logit of about 6.2 (bfloat16; 8.3 in float16; 16.6 in fp32), so `1 - p` is 0. An eps
added after the subtraction that is below 2**-9 cannot stand in for what 16 bits lost: in float16 1e-15 is
0 itself (the loss is inf, the gradient NaN); in bfloat16 the loss is the constant -log(eps) (34.5 for
1e-15) and its gradient 0, since the sigmoid's derivative p(1 - p) is 0, where fp32 still has a gradient
of 0.9997 at a logit of 8 (measured with torch 2.13 on the CPU under bfloat16 and float16 autocast).

project/clamps.py reads the sigmoid inside one function (`log(1 - torch.sigmoid(x))`); this module reads the
two halves apart: the model's `forward` in its own module (ClassFacts.sigmoid_output, through the file's
imports: ProjectView.class_facts), and the loss in the file that steps, in the step or in a function of the
file the step hands the output to. The model is found the way analysis/model_widths.py finds the one an
optimizer updates: the name's value, `.to(device)` moves and DDP wrappers taken off, and a parameter of a
function the file only calls, through what each call passes.
"""

from __future__ import annotations

import ast
from typing import Optional, Union

from gpulint.analysis.amp_steps import AmpStep
from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.ast_values import self_attribute_value, value_at
from gpulint.analysis.model_widths import passed_values
from gpulint.project.ast_nodes import walk
from gpulint.project.clamps import BFLOAT16_ROUNDS_TO_ONE, one_minus
from gpulint.project.loader_flow import own_nodes

_LOGS = frozenset({"torch.log", "torch.log1p"})
# methods that keep a tensor's dtype (the shape, or the model it is: `.to(device)`); `.float()` and
# `.to(torch.float32)` are not among them, so a value cast to float32 before the subtraction does not count
_SHAPES = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "t", "view_as", "clone"})
_MOVES = frozenset({"to", "cuda", "train"})
_WRAPPERS = frozenset({"DistributedDataParallel", "DataParallel"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def logs_one_minus_model_sigmoid(ctx: AstContext, step: AmpStep) -> bool:
    """The step (or a function of the file it calls) takes `log(1 - p)`, `log(1 - p + eps)` with eps below 2**-9,
    or `log1p(-p)`, where `p` is what a model of the project returns whose `forward` ends in a sigmoid."""
    if "log" not in ctx.text:
        return False
    nodes = list(walk(step.node))
    for node in nodes:
        if isinstance(node, ast.Call):
            operand = one_minus_operand(ctx, node)
            if isinstance(operand, ast.Name) and _model_sigmoid_output(ctx, operand):
                return True
    functions = {s.name: s for s in ctx.tree.body if isinstance(s, _FUNCTIONS)}
    for node in nodes:  # `loss = link_loss(pos_out, neg_out)`: a loss function of the file, handed the outputs
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
            continue
        for position, keyword in _logged_parameters(ctx, functions[node.func.id]):
            argument = next((k.value for k in node.keywords if k.arg == keyword), None)
            if argument is None and 0 <= position < len(node.args) \
                    and not any(isinstance(a, ast.Starred) for a in node.args[:position + 1]):
                argument = node.args[position]
            argument = _uncast(argument) if argument is not None else None
            if isinstance(argument, ast.Name) and _model_sigmoid_output(ctx, argument):
                return True
    return False


def one_minus_operand(ctx: AstContext, call: ast.Call) -> Optional[ast.expr]:
    """`p` of `torch.log(1 - p)`, `torch.log(1 - p + eps)` (eps < 2**-9), `torch.log1p(-p)`, `(1 - p).log()`,
    with `p` taken off shape methods (`p.squeeze()`, `p[i]`); None for anything else, or a `p` cast to float32
    on the way (`1 - p.float()`)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("log", "log1p"):
        return None
    if ctx.qualname(func) in _LOGS:
        if len(call.args) != 1 or call.keywords:
            return None
        argument = call.args[0]
    elif not call.args and not call.keywords and not ctx.qualname(func.value):
        argument = func.value  # a tensor's own method
    else:
        return None
    operand = one_minus(func.attr, argument, lambda node: _number(ctx, node), eps_below=BFLOAT16_ROUNDS_TO_ONE)
    return _uncast(operand) if operand is not None else None


def _uncast(value: ast.expr) -> Optional[ast.expr]:
    """`value` without shape methods and subscripts; None where something else (a cast) is applied."""
    while True:
        if isinstance(value, ast.Subscript):
            value = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SHAPES:
            value = value.func.value
        else:
            return value if isinstance(value, ast.Name) else None


def _number(ctx: AstContext, node: ast.expr) -> Optional[float]:
    """A numeric literal, or a name whose value where it is read is one."""
    if isinstance(node, ast.Name):
        value = value_at(ctx, node)
        node = value if value is not None else node
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _logged_parameters(ctx: AstContext, function: Union[ast.FunctionDef, ast.AsyncFunctionDef]
                       ) -> list[tuple[int, str]]:
    """(position, name) of the parameters of a module-level function that it takes `log(1 - p)` of, unbound
    in it otherwise (position -1: keyword-only)."""
    arguments = function.args
    ordered = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    keyword_only = [a.arg for a in arguments.kwonlyargs]
    nodes = list(own_nodes(function.body))
    rebound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    found: list[tuple[int, str]] = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        operand = one_minus_operand(ctx, node)
        if not isinstance(operand, ast.Name) or operand.id in rebound:
            continue
        if operand.id in ordered:
            found.append((ordered.index(operand.id), operand.id))
        elif operand.id in keyword_only:
            found.append((-1, operand.id))
    return found


def _model_sigmoid_output(ctx: AstContext, name: ast.Name) -> bool:
    """`name` holds what a call of a model returns (`pos_out = predictor(h[i], h[j])`, shape methods allowed),
    and that model is an instance of a project class whose `forward` ends in a sigmoid."""
    value = value_at(ctx, name)
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SHAPES:
        value = value.func.value
    if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)):
        return False
    return _sigmoid_model(ctx, value.func, 0)


def _sigmoid_model(ctx: AstContext, model: ast.expr, depth: int) -> bool:
    """`model` is an instance of a project class whose `forward` ends in a sigmoid: a name bound to one (where
    it is read, or through every call of the function whose parameter it is), `self.<attr>` bound to one,
    `.to(device)`/`.cuda()` moves and DDP/DataParallel wrappers taken off."""
    if depth > 8:
        return False
    if isinstance(model, ast.Name):
        value = value_at(ctx, model)
        if value is not None:
            return _sigmoid_model(ctx, value, depth + 1)
        passed = passed_values(ctx, model)  # `def train(model, predictor, ...)`, called with the models
        return bool(passed) and all(_sigmoid_model(ctx, v, depth + 1) for v in passed or ())
    if isinstance(model, ast.Attribute):
        if isinstance(model.value, ast.Name) and model.value.id == "self":
            held = self_attribute_value(ctx, model, skip_none=True)
            return held is not None and _sigmoid_model(ctx, held, depth + 1)
        return False
    if not isinstance(model, ast.Call):
        return False
    func = model.func
    if isinstance(func, ast.Attribute) and func.attr in _MOVES:
        return _sigmoid_model(ctx, func.value, depth + 1)  # `LinkPredictor(args).to(device)`
    qualified = ctx.qualname(func) or ""
    if qualified.rsplit(".", 1)[-1] in _WRAPPERS:
        wrapped = next((a for a in model.args if not isinstance(a, ast.Starred)), None)
        return wrapped is not None and _sigmoid_model(ctx, wrapped, depth + 1)
    spelled = qualified or (func.id if isinstance(func, ast.Name) else None)
    if spelled is None:
        return False
    found = ctx.project.class_facts(spelled)
    return found is not None and found.sigmoid_output
