"""GPU302 checkpoint-without-use-reentrant: torch.utils.checkpoint without an explicit use_reentrant."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from gpulint.analysis.deep_stacks import CHECKPOINT_FUNCTIONS, CHECKPOINT_SEQUENTIAL
from gpulint.analysis.evidence import REFUTED, SHOWN, Decision, Evidence, Premise
from gpulint.analysis.guards_cst import version_guarded
from gpulint.analysis.nn_modules import GRAD_OFF
from gpulint.analysis.training import training_facts
from gpulint.core import floors
from gpulint.core.arguments import positional_args, visible_dict_keys
from gpulint.core.context import FileContext
from gpulint.core.edits import Applicability
from gpulint.core.pending import PendingFix, Replace
from gpulint.core.rewrite import add_keyword, is_literal, set_keyword
from gpulint.core.verification import NEUTRAL, TRAINED_PARAMETERS, Verification
from gpulint.core.walk import walk
from gpulint.rules.base import Rule, RuleDocs, Target

CHECKPOINT_MODULE = "torch.utils.checkpoint"
HF_ENABLE = "gradient_checkpointing_enable"
HF_KWARGS = "gradient_checkpointing_kwargs"


NO_USE_REENTRANT = Premise(
    "no-use-reentrant",
    "torch's `checkpoint`/`checkpoint_sequential` (through any alias) is called without `use_reentrant`, "
    "looking through `**kwargs` dicts visible in the file, or Hugging Face's "
    "`gradient_checkpointing_enable()` without `gradient_checkpointing_kwargs={\"use_reentrant\": ...}`.")
CURRENT_TORCH = Premise(
    "current-torch",
    "the call is not code kept for an older torch (a branch of a torch version test, a flag computed from "
    "`torch.__version__` here or in the module it is imported from, the fallback of `try/except "
    "ImportError`), and the torch floor the project declares has `use_reentrant` (1.13).")
UNDER_AUTOGRAD = Premise(
    "under-autograd",
    "the checkpointed code can run with grad enabled, where the reentrant trap drops gradients: refuted "
    "inside `torch.no_grad()`/`inference_mode()` (a block or a decorator) and in inference scripts (a "
    "`__main__` script that runs models under no_grad and trains nothing), and in a module whose importers "
    "train nothing and include such an inference script (a model file only a sampling script uses): "
    "checkpointing there does nothing.")


def use_reentrant_too_new(ctx: FileContext) -> Optional[floors.TooNew]:
    """Set when the project supports a torch older than `use_reentrant=` (torch-version)."""
    return floors.too_new(ctx.settings.torch_version, [floors.USE_REENTRANT])


class CheckpointWithoutUseReentrant(Rule):
    code = "GPU302"
    name = "checkpoint-without-use-reentrant"
    habit = "activation-checkpointing"
    summary = "checkpoint/checkpoint_sequential without an explicit use_reentrant"
    impact = "correctness: reentrant mode silently drops parameter gradients when inputs need no grad"
    needles = ("checkpoint",)
    ast_needles = ((*sorted(CHECKPOINT_FUNCTIONS), f".{HF_ENABLE}("),)
    target = Target.ANY
    fix = Applicability.UNSAFE
    verification = Verification(NEUTRAL, ("checkpoint",), "the checkpoint call with use_reentrant=False runs",
                                lambda kind, details: details.get("use_reentrant") is False,
                                changes=(TRAINED_PARAMETERS,))
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)`
        calls (through any import alias) that do not pass `use_reentrant`, looking through
        `**kwargs` dicts visible in the file; and for Hugging Face's
        `model.gradient_checkpointing_enable()` without
        `gradient_checkpointing_kwargs={"use_reentrant": ...}`, since Transformers then
        passes `use_reentrant=True` itself. `checkpoint_wrapper` and
        `apply_activation_checkpointing` are not reported: they default to the
        non-reentrant implementation. A function of your own called `checkpoint` is never
        reported.
        """,
        why="""
        Without `use_reentrant`, torch (2.1 through 2.14) warns and still selects the
        reentrant implementation. There, a checkpointed block whose inputs do not require
        grad (frozen embeddings, a first block fed raw data, adapters on a frozen model)
        silently gets no parameter gradients: its weights never train, and nothing fails.
        The non-reentrant mode has no such trap, supports keyword arguments,
        `torch.autograd.grad` and nested checkpoints, and gave bit-identical losses over 30
        training steps with dropout, measured on CPU. See the torch.utils.checkpoint
        documentation and pytorch/pytorch#100551.
        """,
        example="""
        x = checkpoint(block, x)
        model.gradient_checkpointing_enable()
        """,
        use_instead="""
        x = checkpoint(block, x, use_reentrant=False)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        """,
        fix_safety="""
        Unsafe: adds `use_reentrant=False`, which changes semantics in rare cases (tensors
        detached or modified in place inside the block behave differently, and the block's
        parameters now do get gradients when its inputs do not require grad). The strictly
        behaviour-preserving choice is `use_reentrant=True`, which silences the warning and
        keeps the trap; write it yourself if you need it (e.g. for DeepSpeed ZeRO-3). Where the
        enclosing function receives the caller's choice, the fix passes it on instead: its
        `use_reentrant` parameter (`use_reentrant=use_reentrant`), or its
        `gradient_checkpointing_kwargs` (`**(gradient_checkpointing_kwargs or {})` to torch,
        `gradient_checkpointing_kwargs=gradient_checkpointing_kwargs` to Transformers). Calls in
        code kept for an older torch (the branches of a torch version test, `try/except
        ImportError`) are not reported: `use_reentrant` may not exist there.
        """,
        premises=(NO_USE_REENTRANT, CURRENT_TORCH, UNDER_AUTOGRAD),
    )

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__(ctx)
        # a class of the file defines its own `gradient_checkpointing_enable`: not Hugging Face's
        self._own_hf_method = HF_ENABLE in ctx.text and any(
            fn.name.value == HF_ENABLE for fn in _all_functions(ctx.module)
        )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualname(node.func)
        if qualified not in CHECKPOINT_FUNCTIONS and not (
                isinstance(node.func, cst.Attribute) and node.func.attr.value == HF_ENABLE):
            return
        if qualified in CHECKPOINT_FUNCTIONS:
            self._torch_checkpoint(node, qualified == CHECKPOINT_SEQUENTIAL)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == HF_ENABLE and not self._own_hf_method:
            self._hf_enable(node)

    def _decision(self, node: cst.Call) -> Decision:
        current = REFUTED if version_guarded(self.ctx.analysis(training_facts), node) \
            or use_reentrant_too_new(self.ctx) else SHOWN
        return self.decide({NO_USE_REENTRANT: SHOWN, CURRENT_TORCH: current,
                            UNDER_AUTOGRAD: self._under_autograd(node)})

    def _under_autograd(self, node: cst.Call) -> Evidence:
        """Refuted under no_grad/inference_mode (a `with` block or a decorator) and in an eval-only file."""
        facts = self.ctx.analysis(training_facts)
        for ancestor in facts.ancestors(node):
            if isinstance(ancestor, cst.With) and any(
                    isinstance(item.item, cst.Call) and self.ctx.qualname(item.item.func) in GRAD_OFF
                    for item in ancestor.items):
                return REFUTED
            if isinstance(ancestor, cst.FunctionDef) and any(
                    self.ctx.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                    in GRAD_OFF for d in ancestor.decorators):
                return REFUTED
        return REFUTED if _inference_script(self.ctx.text) or self.ctx.project.evaluated_only else SHOWN

    def _torch_checkpoint(self, node: cst.Call, sequential: bool) -> None:
        kwargs = self.ctx.kwargs(node)
        if not kwargs.complete or kwargs.has("use_reentrant"):
            return
        if sequential:
            positional = positional_args(node)
            if positional is None or len(positional) > 3:
                return  # checkpoint_sequential(functions, segments, input, use_reentrant)
        decision = self._decision(node)
        if not decision.report:
            return
        name = "checkpoint_sequential" if sequential else "checkpoint"
        fix = None
        note = ""
        forwarded = self._caller_choice()
        too_new = use_reentrant_too_new(self.ctx)
        if too_new is not None:
            note = f"no fix: {too_new.reason()}"
        elif forwarded is not None and forwarded.annotation == "kwargs":
            new = _with_star_kwargs(node, f"({forwarded.name} or {{}})" if forwarded.none else forwarded.name)
            fix = PendingFix.unsafe(f"Pass the caller's `{forwarded.name}` on", Replace(node, new))
        elif forwarded is not None:
            new = add_keyword(node, "use_reentrant", forwarded.name)
            fix = PendingFix.unsafe(f"Pass the caller's `use_reentrant={forwarded.name}` on", Replace(node, new))
        else:
            new = add_keyword(node, "use_reentrant", "False")
            fix = PendingFix.unsafe("Add `use_reentrant=False`", Replace(node, new))
        self.report_decided(
            decision,
            node,
            f"{name}() without use_reentrant runs in reentrant mode: blocks with no-grad inputs get no gradients",
            fix, note=note,
        )

    def _caller_choice(self) -> "Optional[_Forwarded]":
        """The enclosing function's own `use_reentrant` or `gradient_checkpointing_kwargs` parameter."""
        for statement in reversed(self.ctx.statements):
            if isinstance(statement, cst.FunctionDef):
                params = statement.params
                for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                    name = param.name.value
                    none = param.default is not None and is_literal(param.default, "None")
                    if name == "use_reentrant":
                        return _Forwarded(name, "value", none)
                    if name == HF_KWARGS:
                        return _Forwarded(name, "kwargs", none)
                return None
        return None

    def _hf_enable(self, node: cst.Call) -> None:
        kwargs = self.ctx.kwargs(node)
        positional = positional_args(node)
        if not kwargs.complete or positional is None:
            return
        fix: Optional[PendingFix] = None
        quote = self.ctx.style.quote
        non_reentrant = f"{{{quote}use_reentrant{quote}: False}}"
        message = f"Pass `gradient_checkpointing_kwargs={non_reentrant}`"
        too_new = use_reentrant_too_new(self.ctx)
        note = f"no fix: {too_new.reason()}" if too_new is not None else ""
        if kwargs.has(HF_KWARGS) or positional:
            value = kwargs.get(HF_KWARGS) if kwargs.has(HF_KWARGS) else positional[0]
            if value is None:
                return  # hidden in a `**dict`
            keys = _dict_literal_keys(value) if isinstance(value, cst.Dict) else None
            if isinstance(value, cst.Name) and not is_literal(value, "None"):
                visible = visible_dict_keys(value, self.ctx.names)
                keys = set(visible) if visible is not None else None
            if keys is None and not is_literal(value, "None"):
                return  # a dict we cannot see
            if keys is not None and "use_reentrant" in keys:
                return
            if use_reentrant_too_new(self.ctx) or HF_KWARGS in kwargs.from_splat:
                fix = None
            elif isinstance(value, cst.Dict):
                fix = PendingFix.unsafe(f"Add `{quote}use_reentrant{quote}: False`",
                                        Replace(value, _add_dict_entry(value, quote)))
            elif is_literal(value, "None") and kwargs.has(HF_KWARGS):
                fix = PendingFix.unsafe(message, Replace(node, set_keyword(node, HF_KWARGS, non_reentrant)))
        elif not use_reentrant_too_new(self.ctx):
            forwarded = self._caller_choice()
            if forwarded is not None and forwarded.annotation == "kwargs":
                fix = PendingFix.unsafe(f"Pass the caller's `{HF_KWARGS}` on",
                                        Replace(node, add_keyword(node, HF_KWARGS, HF_KWARGS)))
            elif forwarded is not None:
                value_code = f"{{{quote}use_reentrant{quote}: {forwarded.name}}}"
                fix = PendingFix.unsafe(f"Pass the caller's `use_reentrant={forwarded.name}` on",
                                        Replace(node, add_keyword(node, HF_KWARGS, value_code)))
            else:
                fix = PendingFix.unsafe(message, Replace(node, add_keyword(node, HF_KWARGS, non_reentrant)))
        self.report_decided(
            self._decision(node),
            node,
            "gradient_checkpointing_enable() without use_reentrant is reentrant: blocks with no-grad inputs get no "
            "gradients",
            fix, note=note,
        )


_GRAD_OFF_TEXT = re.compile(r"\bno_grad\b|\binference_mode\b")
_TRAINING_TEXT = re.compile(r"\.backward\(|\bautograd\.grad\(|\boptim\b|\boptimizer\b|\bTrainer\b|\bRunner\b")
_SCRIPT = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def _inference_script(text: str) -> bool:
    """A script (a `__main__` guard) that runs models under no_grad/inference_mode and trains nothing: the
    modules it defines are not trained here. (`.eval()` alone is no evidence: model files freeze stages
    with it, and are trained by another file.)"""
    return bool(_SCRIPT.search(text) and _GRAD_OFF_TEXT.search(text) and not _TRAINING_TEXT.search(text))


def _all_functions(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class _Defs(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

    walk(module, _Defs())
    return found


def _dict_literal_keys(value: cst.Dict) -> Optional[set[str]]:
    keys: set[str] = set()
    for element in value.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        key = element.key.evaluated_value
        if not isinstance(key, str):
            return None
        keys.add(key)
    return keys


@dataclass(frozen=True)
class _Forwarded:
    """A parameter of the enclosing function that carries the caller's checkpointing choice."""

    name: str
    annotation: str  # "value": `use_reentrant`; "kwargs": `gradient_checkpointing_kwargs`
    none: bool  # its default is None


def _with_star_kwargs(node: cst.Call, code: str) -> cst.Call:
    """`checkpoint(f, x)` -> `checkpoint(f, x, **(kwargs or {}))`."""
    args = list(node.args)
    if args and not isinstance(args[-1].comma, cst.Comma):
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return node.with_changes(args=[*args, cst.Arg(value=cst.parse_expression(code), star="**")])


def _add_dict_entry(value: cst.Dict, quote: str = '"') -> cst.Dict:
    entry = cst.DictElement(
        key=cst.SimpleString(f"{quote}use_reentrant{quote}"),
        value=cst.Name("False"),
        whitespace_before_colon=cst.SimpleWhitespace(""),
        whitespace_after_colon=cst.SimpleWhitespace(" "),
    )
    elements = list(value.elements)
    if elements:
        last = elements[-1]
        if isinstance(last.comma, cst.Comma):
            entry = entry.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))
            elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elements.append(entry)
    return value.with_changes(elements=elements)
