"""The mixed-precision rewrite of a training step (GPU001, GPU002): the transformation.

Wrap the forward pass and loss in autocast (backward stays outside), and for float16 route
backward and the optimizer step through one GradScaler created before the loop. The whole
rewrite is one CST transformation of the statement that receives the scaler, so every edit of
the fix lands in one replacement that the engine reduces to the changed text. What it wraps and
where the scaler lives are decided in rewrites/amp_plan.py.
"""

from __future__ import annotations

from dataclasses import field
from typing import Callable, Optional, Sequence, Union

import libcst as cst

from gpulint.analysis.amp_fix import SHARDED_SCALER_MODULE
from gpulint.analysis.training import (
    TrainingFacts,
)
from gpulint.core.context import FileContext
from gpulint.core.pending import PendingEdit, Replace
from gpulint.core.rewrite import add_keyword
from gpulint.records import dataclass
from gpulint.rewrites.amp_plan import Region, ScalerHome, ScalerPlan, as_float

Container = Union[cst.IndentedBlock, cst.Module]

# -- the transformation ---------------------------------------------------------------
@dataclass
class _Plan:
    calls: dict[int, Callable[[cst.Call], cst.BaseExpression]] = field(default_factory=dict)
    before: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    after: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    small_after: dict[int, list[cst.BaseSmallStatement]] = field(default_factory=dict)
    wrap: Optional[Region] = None
    with_item: Optional[cst.BaseExpression] = None
    parameters: dict[int, list[str]] = field(default_factory=dict)  # def -> parameters it gains (`=None`)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        rewrite = self.plan.calls.get(id(original_node))
        return rewrite(updated_node) if rewrite is not None else updated_node

    def _statements(self, original: cst.CSTNode, original_body: Sequence[cst.BaseStatement],
                    updated_body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        plan = self.plan
        wrap = plan.wrap if plan.wrap is not None and plan.wrap.container is original else None
        out: list = []
        index = 0
        while index < len(updated_body):
            o, u = original_body[index], updated_body[index]
            if wrap is not None and index == wrap.start:
                group = list(updated_body[wrap.start:wrap.end + 1])
                out.append(_with_statement(plan.with_item, group))  # type: ignore[arg-type]
                index = wrap.end + 1
                continue
            out.extend(plan.before.get(id(o), ()))
            out.append(u)
            out.extend(plan.after.get(id(o), ()))
            index += 1
        return out

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._statements(original_node, original_node.body, updated_node.body))

    def _small(self, original_body: Sequence[cst.BaseSmallStatement],
               updated_body: Sequence[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement]:
        out: list = []
        for o, u in zip(original_body, updated_body):
            out.append(u)
            out.extend(self.plan.small_after.get(id(o), ()))
        return out

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        return updated_node.with_changes(body=self._small(original_node.body, updated_node.body))

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        return updated_node.with_changes(body=self._small(original_node.body, updated_node.body))

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        names = self.plan.parameters.get(id(original_node))
        if names:
            return updated_node.with_changes(params=_with_parameters(updated_node.params, names))
        return updated_node


def _with_statement(item: cst.BaseExpression, group: list[cst.BaseStatement]) -> cst.With:
    first = group[0]
    assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    leading = first.leading_lines
    group[0] = first.with_changes(leading_lines=())
    return cst.With(items=[cst.WithItem(item=item)], body=cst.IndentedBlock(body=group), leading_lines=leading)


def _strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Tuple, cst.NamedExpr, cst.Yield, cst.GeneratorExp)):
        return expr
    return expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", ()) else expr


def home_edits(facts: TrainingFacts, rewrite: "StepRewrite") -> list[Replace]:
    """The edits outside the step's loop: create the scaler at home (with the dtype choice under
    amp-dtype "auto"), pass both in, save and load the scaler's state."""
    home, name = rewrite.home, rewrite.scaler_name
    assert home is not None
    quote = facts.ctx.style.string
    statements = [cst.parse_statement(code + "\n") for code in _creation(rewrite, home.device, home.creation)]
    edits: list[Replace] = [Replace(home.creation, [home.creation, *statements])]
    if home.function is not None:  # the function's new parameters come with the step's edit
        passed = _passed(rewrite)
        for call in home.calls:
            new = call
            for each in passed:
                new = add_keyword(new, each, each)
            edits.append(Replace(call, new))
    taken = [edit.node for edit in edits]
    for holder in home.saves:
        if any(facts.contains(other, holder) or facts.contains(holder, other) for other in taken):
            continue
        edits.append(Replace(holder, _with_entry(holder, name)))
        taken.append(holder)
    for line, checkpoint in home.loads:
        if any(facts.contains(other, line) or facts.contains(line, other) for other in taken):
            continue
        guard = cst.parse_statement(
            f"if {quote(name)} in {checkpoint}:\n    {name}.load_state_dict({checkpoint}[{quote(name)}])\n")
        edits.append(Replace(line, [line, guard]))
        taken.append(line)
    return edits


def _passed(rewrite: "StepRewrite") -> list[str]:
    """What the caller passes to the step's function: the scaler, and the dtype chosen (amp-dtype "auto")."""
    return [rewrite.scaler_name] + ([rewrite.choice_name] if rewrite.choice is not None and rewrite.choice_name
                                    else [])


def _creation(rewrite: "StepRewrite", device: str, where: cst.CSTNode) -> list[str]:
    """The statements that create the scaler: the dtype choice (amp-dtype "auto"), then the scaler."""
    enabled = f", enabled=({rewrite.scaler_enabled})" if rewrite.scaler_enabled else ""
    scaler = f"{rewrite.scaler_name} = {_scaler_class(rewrite)}({device}{enabled})"
    if rewrite.choice is None:
        return [scaler]
    return [f"{rewrite.choice_name} = {rewrite.choice(device, where)}", scaler]


def _with_parameters(params: cst.Parameters, names: list[str]) -> cst.Parameters:
    """`def train(a, b)` -> `def train(a, b, scaler=None)` (keyword-only after `*args`)."""
    new = [cst.Param(name=cst.Name(name), default=cst.Name("None"), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))) for name in names]
    if isinstance(params.star_arg, cst.Param) or params.kwonly_params:
        return params.with_changes(kwonly_params=[*params.kwonly_params, *new])
    if params.star_kwarg is not None or params.params or params.posonly_params:
        return params.with_changes(params=[*params.params, *new])
    return params.with_changes(params=new)


def _with_entry(holder: cst.Dict, name: str) -> cst.Dict:
    """Add `"scaler": scaler.state_dict()` after the last entry, in the dict's own quote style and layout."""
    quote = "'"
    for element in holder.elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
            quote = element.key.quote[-1]
            break
    entry = cst.DictElement(
        key=cst.SimpleString(f"{quote}{name}{quote}"), value=cst.parse_expression(f"{name}.state_dict()"),
        whitespace_before_colon=cst.SimpleWhitespace(""), whitespace_after_colon=cst.SimpleWhitespace(" "))
    elements = list(holder.elements)
    last = elements[-1]
    if isinstance(last.comma, cst.Comma):
        entry = entry.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))
        separator = _element_separator(holder)
        elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=separator))
    else:
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_element_separator(holder)))
    elements.append(entry)
    return holder.with_changes(elements=elements)


def _element_separator(holder: cst.Dict) -> cst.BaseParenthesizableWhitespace:
    for element in holder.elements[:-1]:
        if isinstance(element.comma, cst.Comma):
            ws = element.comma.whitespace_after
            if isinstance(ws, cst.ParenthesizedWhitespace):
                return ws.with_changes(first_line=ws.first_line.with_changes(comment=None), empty_lines=())
            return ws
    return cst.SimpleWhitespace(" ")


@dataclass(frozen=True)
class StepRewrite:
    """Everything the fix writes, decided by the rule."""

    anchor: cst.BaseStatement
    torch: str  # the file's spelling of `torch`
    device: str  # code for the device type
    region: Optional[Region] = None  # wrap in autocast
    dtype: Optional[str] = None  # code of the autocast's dtype: `torch.bfloat16`, `torch.float16`, `amp_dtype`
    # amp-dtype "auto": the name the run-time dtype choice binds, and its right-hand side for the
    # device code valid at a statement (the choice is written where the scaler is created)
    choice_name: Optional[str] = None
    choice: Optional[Callable[[str, cst.CSTNode], str]] = None
    scaler: Optional[ScalerPlan] = None
    scaler_name: str = "scaler"
    scaler_enabled: Optional[str] = None  # `enabled=` for a scaler needed only on a float16 path
    scaler_class: str = ""  # code of the scaler's class (default: torch.amp.GradScaler)
    home: Optional[ScalerHome] = None  # created next to the optimizer instead of before the loop
    float_calls: tuple[cst.Call, ...] = ()  # calls kept out of autocast whose tensor inputs become float32


def step_edits(facts: TrainingFacts, rewrite: StepRewrite) -> list[Replace]:
    """The replacement of the anchor statement carrying the step's rewrite, and the scaler's home."""
    edits = [step_edit(facts, rewrite)]
    if rewrite.home is not None and rewrite.scaler is not None:
        edits += home_edits(facts, rewrite)
    return edits


def _scaler_class(rewrite: StepRewrite) -> str:
    return rewrite.scaler_class or f"{rewrite.torch}.amp.GradScaler"


def step_edit(facts: TrainingFacts, rewrite: StepRewrite) -> Replace:
    """One replacement of the anchor statement carrying the whole rewrite of the step."""
    plan = _Plan()
    name = rewrite.scaler_name
    if rewrite.region is not None:
        plan.wrap = rewrite.region
        plan.with_item = cst.parse_expression(
            f"{rewrite.torch}.autocast(device_type={rewrite.device}, dtype={rewrite.dtype})")
    for call in rewrite.float_calls:
        plan.calls[id(call)] = _float_inputs
    scaler = rewrite.scaler
    new_statements: list[cst.BaseStatement] = []
    if scaler is not None:
        backward = scaler.backward
        scale = cst.parse_expression(f"{name}.scale(_)")
        assert isinstance(scale, cst.Call)

        def scaled(loss: cst.BaseExpression) -> cst.Call:
            return scale.with_changes(args=[cst.Arg(value=_strip_parens(loss))])

        if backward.autograd:
            plan.calls[id(backward.call)] = lambda updated: cst.Call(
                func=cst.Attribute(value=scaled(updated.args[0].value), attr=cst.Name("backward")))
        else:
            plan.calls[id(backward.call)] = lambda updated: updated.with_changes(
                func=updated.func.with_changes(value=scaled(updated.func.value)))  # type: ignore[attr-defined]
        optimizer_code = facts.ctx.code(scaler.step.optimizer)
        plan.calls[id(scaler.step.call)] = lambda updated: cst.parse_expression(
            f"{name}.step({optimizer_code})")
        expr = facts.parent(scaler.step.call)
        line = facts.statement_of(scaler.step.call)
        update = cst.parse_statement(f"{name}.update()\n")
        if isinstance(line, cst.SimpleStatementLine) and isinstance(facts.parent(line), cst.IndentedBlock):
            plan.after[id(line)] = [update]  # its own line, also after `loss.backward(); opt.step()`
        else:
            plan.small_after[id(expr)] = [cst.Expr(cst.parse_expression(f"{name}.update()"))]
        if scaler.unscale_before is not None:
            plan.before[id(scaler.unscale_before)] = [cst.parse_statement(f"{name}.unscale_({optimizer_code})\n")]
        creation = _creation(rewrite, rewrite.device, rewrite.anchor)
        if rewrite.home is None:
            new_statements.extend(cst.parse_statement(code + "\n") for code in creation)
        elif rewrite.home.function is not None:  # a fallback for callers that pass no scaler
            body = "".join(f"    {code}\n" for code in creation)
            fallback = cst.parse_statement(f"if {name} is None:\n{body}")
            # one edit of the whole function: its new parameters and the fallback before the loop,
            # so the parameter list is laid out with the def it belongs to
            function = rewrite.home.function
            plan.before[id(rewrite.anchor)] = [fallback]
            plan.parameters[id(function)] = _passed(rewrite)
            rewritten = function.visit(_Rewriter(plan))
            assert isinstance(rewritten, cst.FunctionDef)
            return Replace(function, rewritten)
    anchor = rewrite.anchor
    transformed = anchor.visit(_Rewriter(plan))
    assert isinstance(transformed, cst.CSTNode)  # the rewriter replaces statements, it never removes one
    if not new_statements:
        return Replace(anchor, transformed)
    assert isinstance(transformed, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    leading = list(transformed.leading_lines)
    split = len(leading)
    while split > 0 and leading[split - 1].comment is not None:
        split -= 1  # the comments directly above the statement describe it (or suppress it): they stay
    head, own = leading[:split], leading[split:]
    new_statements[0] = new_statements[0].with_changes(leading_lines=head)
    if isinstance(anchor, (cst.FunctionDef, cst.ClassDef)):
        # new statements above a def or class: the blank lines PEP 8 wants between them (two at top level)
        own = [cst.EmptyLine(indent=False)] * (2 if isinstance(facts.parent(anchor), cst.Module) else 1) + own
    elif own and head and head[-1].comment is None:
        own = [cst.EmptyLine(indent=False), *own]  # a blank line set the comment block apart: it keeps one
    transformed = transformed.with_changes(leading_lines=own)
    return Replace(anchor, [*new_statements, transformed])


def _float_inputs(call: cst.Call) -> cst.Call:
    """binary_cross_entropy(input, target, ...): both computed in float32, outside autocast."""
    args = list(call.args)
    positional = [i for i, a in enumerate(args) if a.keyword is None and not a.star][:2]
    keywords = [i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value in ("input", "target")]
    for index in positional + keywords:
        args[index] = args[index].with_changes(value=as_float(args[index].value))
    return call.with_changes(args=args)


def grad_scaler_class(ctx: FileContext, torch: str, parallel: frozenset[str]) -> tuple[str, Optional[PendingEdit]]:
    """`torch.amp.GradScaler`, or FSDP's ShardedGradScaler, which agrees on inf/NaN across ranks."""
    if "fsdp" in parallel:
        reference = ctx.imports.reference(SHARDED_SCALER_MODULE, "ShardedGradScaler", prefer_from=True)
        return reference.expr, reference.edit
    return f"{torch}.amp.GradScaler", None
