"""GPU302 checkpoint-without-use-reentrant: torch.utils.checkpoint without an explicit use_reentrant."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Optional, Union

from gpulint.analysis.ast_context import (
    AstContext,
    Detection,
    FunctionNode,
    dotted,
    positional_args,
    visible_dict_keys,
)
from gpulint.analysis.ast_context import arg as argument
from gpulint.analysis.ast_values import single_value
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Decision, Evidence, Premise
from gpulint.analysis.guards import version_guarded
from gpulint.analysis.loaders import local_definition
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.style import detect as detect_style
from gpulint.core.torch_api import (
    CHECKPOINT,
    CHECKPOINT_FUNCTIONS,
    CHECKPOINT_SEQUENTIAL,
    CHECKPOINT_SEQUENTIAL_USE_REENTRANT,
    GRAD_OFF,
)
from gpulint.core.verification import NEUTRAL, TRAINED_PARAMETERS, Verification
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.checkpoint_getters import branches
from gpulint.project.facts import CHECKPOINT_OPTION, OPTION_OFF
from gpulint.records import dataclass
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix
    from gpulint.project.view import ProjectView

CHECKPOINT_MODULE = "torch.utils.checkpoint"
HF_ENABLE = "gradient_checkpointing_enable"
HF_KWARGS = "gradient_checkpointing_kwargs"


NO_USE_REENTRANT = Premise(
    "no-use-reentrant",
    "torch's `checkpoint`/`checkpoint_sequential` (through any alias) is called without `use_reentrant`, "
    "looking through `**kwargs` dicts visible in the file, or Hugging Face's "
    "`gradient_checkpointing_enable()` without `gradient_checkpointing_kwargs={\"use_reentrant\": ...}`. "
    "Also torch's `checkpoint` held by a name or a `self.` attribute (`self.maybe_ckpt = checkpoint if "
    "\"ffn\" in use_ckpting else lambda f, x: f(x)`) that is only ever called, and called without "
    "`use_reentrant` (reported at the binding, whose `checkpoint` the fix binds with `use_reentrant=False`: a "
    "keyword added at the calls would reach the other branch, a lambda that takes none); and the calls of what "
    "a function of the project returns (`checkpoint_fn = get_checkpoint_fn()`, read in its module or a module "
    "it imports) where that function returns torch's `checkpoint` and nothing else: every `return`, through "
    "the names it returns, gives torch's `checkpoint` (reported at the call). A function that may return "
    "another one (OpenFold returns DeepSpeed's `if deepspeed_is_configured`, else torch's) gives nothing: "
    "which one runs is configuration the linter does not see, and DeepSpeed's takes no `use_reentrant`.")
CURRENT_TORCH = Premise(
    "current-torch",
    "the call is not code kept for an older torch (a branch of a torch version test, a flag computed from "
    "`torch.__version__` here or in the module it is imported from, the fallback of `try/except "
    "ImportError`), the torch floor the project declares has `use_reentrant` (1.13), and the code can run on such "
    "a torch (no unconditional import of a module removed before it, such as `torchtext.legacy`).")
CURRENT_TRANSFORMERS = Premise(
    "current-transformers",
    "for Hugging Face's `gradient_checkpointing_enable()`: the project's transformers can take "
    "`gradient_checkpointing_kwargs` (4.35 on, huggingface/transformers#27020; before it the call takes no "
    "argument and no way of passing `use_reentrant` exists, so the fix raises a TypeError). Refuted when every "
    "transformers the project's pins admit is older, read from the files the torch floor comes from "
    "(requirements*.txt, setup.py, setup.cfg, pyproject.toml, conda environment files, install commands): "
    "`transformers==4.27.1`, `<4.30`, `~=4.28.0`; shown by an unpinned transformers, a range that reaches 4.35, "
    "or a call that already passes `gradient_checkpointing_kwargs` (the code runs on 4.35 or later).")
REENTRANT_DEFAULT = Premise(
    "reentrant-default",
    "for Hugging Face's `gradient_checkpointing_enable()`: without `gradient_checkpointing_kwargs` the project's "
    "transformers checkpoints in reentrant mode (4.35 to 4.x pass `use_reentrant=True` to torch; 5.0 and later "
    "pass `use_reentrant=False`). Refuted when every transformers the project's pins admit is 5.0 or later "
    "(`transformers>=5.4.0`, read from the same files as CURRENT_TRANSFORMERS): the call is already "
    "non-reentrant and the fix changes nothing (blind19: allenai/open-instruct).")
TRAP_CAN_BITE = Premise(
    "trap-can-bite",
    "for Hugging Face's `gradient_checkpointing_enable()`: the reentrant trap can drop gradients here, because the "
    "model's layers get trainable adapters while its input embeddings stay frozen, so no checkpointed block's input "
    "requires grad. Shown by adapters added to the same model in the same function: `<model>.add_adapter(...)` or "
    "`load_adapter(...)` after the call (Transformers makes the inputs require grad itself only for adapters loaded "
    "before it), or PEFT's `get_peft_model(<model>, ...)` before it (PEFT does so only for a model whose "
    "checkpointing is already on). Refuted where the inputs are made to require grad: "
    "`<model>.enable_input_require_grads()`, PEFT's `prepare_model_for_kbit_training(<model>)`, "
    "`requires_grad_(True)` on an embedding of the model, adapters loaded before the call or wrapped by PEFT after "
    "it. Undecided otherwise: a model fine-tuned whole, or by textual inversion, trains its embeddings, so the "
    "blocks' inputs require grad, and Transformers passes `use_reentrant=True` itself, so torch does not warn: the "
    "fix would change nothing (blind19: kohya-ss/sd-scripts' text encoders).")
UNDER_AUTOGRAD = Premise(
    "under-autograd",
    "the checkpointed code can run with grad enabled, where the reentrant trap drops gradients: refuted "
    "inside `torch.no_grad()`/`inference_mode()` (a block or a decorator) and in inference scripts (a "
    "`__main__` script that runs models under no_grad and trains nothing), and in a module whose importers "
    "train nothing and include such an inference script or a notebook that runs models under no_grad and "
    "trains nothing (a model file only a sampling script or a demo notebook uses): "
    "checkpointing there does nothing. Its importers include the files that import it inside a function, and "
    "their own importers (a factory's `define_G` that imports the network a training script builds through it).")

FIX_CHANGES = Premise(
    "fix-changes-something",
    "for torch's `checkpoint`/`checkpoint_sequential`: passing `use_reentrant` changes what a run shows, a "
    "gradient the reentrant mode drops or torch's warning about the missing argument. Refuted when both are "
    "ruled out: the call's first input (`x` in `checkpoint(block, x, ...)`, `input` of `checkpoint_sequential`) "
    "is made to require grad in the same function before the call, by a statement every path to it runs "
    "(`x.requires_grad_(True)`, `x.requires_grad_()`, `x.requires_grad = True`, `x = x.requires_grad_()`), with "
    "nothing rebinding `x` or turning its grad off in between, so the reentrant mode keeps the block's "
    "gradients; and every torch the project's pins admit is older than 2.1, which does not warn (`pytorch=2.0.1` "
    "in environment.yml, `torch==1.13.1`, `torch>=1.12,<2.1`, read from the file the torch floor comes from; not "
    "with a configured `torch-version`, which bounds the torch from below only). Either alone leaves it shown: "
    "a block whose input needs no grad loses its parameters' gradients on any torch (blind11/12: MiniGPT-4's "
    "ViT and VideoMAE's blocks on torch before 2.1), and from 2.1 every call warns (blind21: "
    "togethercomputer/OpenChatKit's blocks make their input require grad on `pytorch=2.0.1`).")

CAN_RUN = Premise(
    "can-run",
    "the call can run: refuted in the body of an `if` that requires an attribute flag (`if self.<flag> and "
    "self.training:`, or the `else` of `if not self.<flag>`) named like a checkpointing switch (`checkpoint` or "
    "`ckpt` in its name: `gradient_checkpointing`, `use_checkpoint`) that the project only ever sets off: the "
    "file assigns it (on `self`, on another object, or as a class attribute) only False, None or 0, at least "
    "once; no file around it (its importers, the modules they import, the modules it imports) gives an "
    "option of that name any other value (by keyword, as a dict key, on another object or on `self` in a "
    "subclass, as a class attribute, by setattr), "
    "calls Hugging Face's `gradient_checkpointing_enable()` or Diffusers' `enable_gradient_checkpointing()` "
    "(which turn every module's "
    "`gradient_checkpointing` on), and the file has no setattr with a computed name. A flag assigned from "
    "a parameter or a config attribute, or set by a setter method, leaves it shown (a copy of Hugging "
    "Face's BERT encoder whose `gradient_checkpointing` is False and never turned on cannot checkpoint).")

LAST_ENABLE = Premise(
    "last-enable",
    "for Hugging Face's `gradient_checkpointing_enable()`: the call's setting is the one the model trains with. "
    "Refuted where the same function later hands the same model to PEFT's `prepare_model_for_kbit_training` "
    "(or `prepare_model_for_int8_training`) without `use_gradient_checkpointing=False`: PEFT enables checkpointing "
    "again with its own `gradient_checkpointing_kwargs`, overriding the fix, and makes the inputs require grad, "
    "which the reentrant mode needs (blind17: georgesung/llm_qlora's QloraTrainer.py).")
PEFT_PREPARE = frozenset({f"peft.{name}" for name in ("prepare_model_for_kbit_training",
                                                      "prepare_model_for_int8_training")})
PEFT_WRAP = frozenset({"peft.get_peft_model", "peft.PeftModel.from_pretrained"})
# Transformers' PEFT integration: methods of the model that insert adapters and freeze the rest
ADAPTER_METHODS = frozenset({"add_adapter", "load_adapter"})


def use_reentrant_too_new(ctx: Union[AstContext, "FileContext"]) -> Optional[floors.Unavailable]:
    """Set when the project supports a torch older than `use_reentrant=` (torch-version), or its code runs
    only on one (a module it imports was removed before: `torchtext.legacy`, gone with torch 1.11)."""
    return floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling, [floors.USE_REENTRANT])


def unwarned_torch(ctx: AstContext) -> bool:
    """Every torch the project's pins admit is older than 2.1, which first warns about a missing `use_reentrant`
    (`pytorch=2.0.1`: the pin's end is 2.1)."""
    above = ctx.settings.torch_above
    return above is not None and above <= floors.USE_REENTRANT_WARNING


def hf_non_reentrant(ctx: AstContext) -> bool:
    """Every transformers the project's pins admit checkpoints without reentrancy by default (5.0 on)."""
    symbol = floors.LIBRARY_SYMBOLS[floors.HF_CHECKPOINTING_KWARGS]
    floor = ctx.settings.library_range(symbol.library)[0]
    return floor is not None and floor >= floors.HF_NON_REENTRANT_DEFAULT


def hf_kwargs_too_new(ctx: AstContext) -> bool:
    """No transformers the project's pins admit takes `gradient_checkpointing_kwargs` (`transformers==4.27.1`)."""
    symbol = floors.LIBRARY_SYMBOLS[floors.HF_CHECKPOINTING_KWARGS]
    return floors.library_lacks(ctx.settings.library_range(symbol.library)[1], symbol.code)


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
    in_tests = False  # a test checkpoints to compare outputs (OLMo's modeling_olmo_test.py), not to train
    verification = Verification(NEUTRAL, ("checkpoint",), "the checkpoint call with use_reentrant=False runs",
                                lambda kind, details: details.get("use_reentrant") is False,
                                changes=(TRAINED_PARAMETERS,))
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)`
        calls (through any import alias) that do not pass `use_reentrant`, looking through
        `**kwargs` dicts visible in the file; and for Hugging Face's
        `model.gradient_checkpointing_enable()` without
        `gradient_checkpointing_kwargs={"use_reentrant": ...}`, since Transformers (4.x) then
        passes `use_reentrant=True` itself, where the trap can bite: LoRA adapters added to
        the frozen model in a way that leaves the blocks' inputs without grad (premise
        `trap-can-bite`). A model fine-tuned whole trains its embeddings, so its blocks'
        inputs require grad, and Transformers' explicit `use_reentrant=True` raises no
        warning: that call is not reported. `checkpoint_wrapper` and
        `apply_activation_checkpointing` are not reported: they default to the
        non-reentrant implementation. A function of your own called `checkpoint` is never
        reported, nor a `gradient_checkpointing_enable()` where a class of the file, or of a
        module it imports, defines a method of that name (a project's own model, whose method
        takes no `gradient_checkpointing_kwargs`), unless the model is built by
        `from_pretrained`. Not reported in test files (`lint-tests`): a test turns checkpointing on to
        compare outputs or to check that the switch works, not to train a model.
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
        model.add_adapter(LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
        """,
        use_instead="""
        x = checkpoint(block, x, use_reentrant=False)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.add_adapter(LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
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
        ImportError`) are not reported: `use_reentrant` may not exist there; nor is Hugging
        Face's call where the project pins a transformers older than 4.35, which has no
        `gradient_checkpointing_kwargs`, or requires transformers 5.0 or later, whose call is
        already non-reentrant.
        """,
        premises=(NO_USE_REENTRANT, CURRENT_TORCH, CURRENT_TRANSFORMERS, REENTRANT_DEFAULT, TRAP_CAN_BITE, LAST_ENABLE,
                  FIX_CHANGES, UNDER_AUTOGRAD, CAN_RUN),
        fix_cases=(
            FixCase("`use_reentrant=False` added",
                    Applicability.UNSAFE, "from_import_checkpoint.py"),
            FixCase("the enclosing function's `use_reentrant` or `gradient_checkpointing_kwargs` passed on instead of"
                    " `False`",
                    Applicability.UNSAFE, "forwards_the_callers_use_reentrant.py"),
            FixCase("torch's `checkpoint` held by a name or attribute and called: the binding gets "
                    "`functools.partial(checkpoint, use_reentrant=False)`",
                    Applicability.UNSAFE, "held_checkpoint_bound_with_use_reentrant.py"),
            FixCase("a call of what a project function returns, torch's `checkpoint` only: `use_reentrant=False` added",
                    Applicability.UNSAFE, "checkpoint_from_own_getter.py"),
        ),
    )

    @classmethod
    def needles_elsewhere(cls, project: Optional["ProjectView"]) -> bool:
        """A function of an imported project module returns torch's checkpoint (`get_checkpoint_fn`)."""
        return project is not None and bool(project.checkpoint_getters)

    def detect(self, ctx: AstContext) -> None:
        # a class of the file defines its own `gradient_checkpointing_enable`: not Hugging Face's
        own_hf_method = HF_ENABLE in ctx.text and any(
            isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == HF_ENABLE
            for fn in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef))
        # so does a class of a module it imports: only a model `from_pretrained` built is shown to be Hugging Face's
        importee_method = ctx.project.checkpointing_method_importees
        project, own = ctx.project, ctx.project.own
        getters = bool(project.checkpoint_getters or own.checkpoint_getters)
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            qualified = ctx.qualname(node.func)
            if qualified in CHECKPOINT_FUNCTIONS:
                self._torch_checkpoint(ctx, node, qualified == CHECKPOINT_SEQUENTIAL)
            elif isinstance(node.func, ast.Attribute) and node.func.attr == HF_ENABLE and not own_hf_method \
                    and (not importee_method or _from_pretrained(ctx, node.func.value)):
                self._hf_enable(ctx, node)
            elif getters and isinstance(node.func, ast.Name) and qualified is None:
                got = _getter_of(ctx, node.func)
                if got is not None:
                    self._torch_checkpoint(ctx, node, False, got)
        for statement in ctx.nodes(ast.Assign):
            assert isinstance(statement, ast.Assign)
            if isinstance(statement.value, (ast.Name, ast.Attribute, ast.IfExp)):
                self._held_checkpoint(ctx, statement)

    def _decision(self, ctx: AstContext, node: ast.Call, hf_kwargs: Optional[bool] = None,
                  hf_default: bool = False, sequential: bool = False) -> Decision:
        """`hf_kwargs`: for Hugging Face's call, whether it already passes `gradient_checkpointing_kwargs`;
        `hf_default`: whether Transformers' own default applies (none passed, or `None`); `sequential`: torch's
        call is `checkpoint_sequential`."""
        current = REFUTED if version_guarded(ctx, node) or use_reentrant_too_new(ctx) else SHOWN
        evidence = {NO_USE_REENTRANT: SHOWN, CURRENT_TORCH: current,
                    UNDER_AUTOGRAD: _under_autograd(ctx, node), CAN_RUN: _can_run(ctx, node)}
        if hf_kwargs is None:
            evidence[FIX_CHANGES] = REFUTED if unwarned_torch(ctx) and _input_requires_grad(ctx, node, sequential) \
                else SHOWN
        if hf_kwargs is not None:
            evidence[CURRENT_TRANSFORMERS] = SHOWN if hf_kwargs or not hf_kwargs_too_new(ctx) else REFUTED
            evidence[REENTRANT_DEFAULT] = REFUTED if hf_default and hf_non_reentrant(ctx) else SHOWN
            evidence[LAST_ENABLE] = REFUTED if _peft_enables_again(ctx, node) else SHOWN
            evidence[TRAP_CAN_BITE] = _trap_can_bite(ctx, node)
        return self.decide(evidence)

    def _torch_checkpoint(self, ctx: AstContext, node: ast.Call, sequential: bool,
                          got: Optional[str] = None) -> None:
        """`got`: for a call of what a project function returns, that function's name as called."""
        kwargs = ctx.kwargs(node)
        if not kwargs.complete or kwargs.passed("use_reentrant"):
            return
        if sequential:
            positional = positional_args(node)
            if positional is None or len(positional) > CHECKPOINT_SEQUENTIAL_USE_REENTRANT[1]:
                return  # passed by position
        decision = self._decision(ctx, node, sequential=sequential)
        if not decision.report:
            return
        name = "checkpoint_sequential" if sequential else "checkpoint"
        note = f"checkpoint returned by {got}()" if got is not None else ""
        forwarded = _caller_choice(ctx, node)
        too_new = use_reentrant_too_new(ctx)
        if too_new is not None:
            note = f"{note}; no fix: {too_new.reason()}" if note else f"no fix: {too_new.reason()}"
            how, message = "", ""
        elif forwarded is not None and forwarded.annotation == "kwargs":
            how, message = "star", f"Pass the caller's `{forwarded.name}` on"
        elif forwarded is not None:
            how, message = "forward", f"Pass the caller's `use_reentrant={forwarded.name}` on"
        else:
            how, message = "add", "Add `use_reentrant=False`"
        ctx.report(
            self, node,
            f"{name}() without use_reentrant runs in reentrant mode: blocks with no-grad inputs get no gradients",
            fix=Applicability.UNSAFE if how else None, fix_message=message,
            data={"how": how, "name": forwarded.name if forwarded else "", "none": bool(forwarded and forwarded.none)},
            note=note, decision=decision,
        )

    def _hf_enable(self, ctx: AstContext, node: ast.Call) -> None:
        kwargs = ctx.kwargs(node)
        positional = positional_args(node)
        if not kwargs.complete or positional is None:
            return
        quote = ctx.analysis(_quote)
        non_reentrant = f"{{{quote}use_reentrant{quote}: False}}"
        how, message = "", f"Pass `gradient_checkpointing_kwargs={non_reentrant}`"
        forwarded: Optional[_Forwarded] = None
        default = True  # Transformers' own default applies: no kwargs, or `None`
        too_new = use_reentrant_too_new(ctx)
        note = f"no fix: {too_new.reason()}" if too_new is not None else ""
        if kwargs.passed(HF_KWARGS) or positional:
            value = kwargs.get(HF_KWARGS) if kwargs.passed(HF_KWARGS) else positional[0]
            if value is None:
                return  # hidden in a `**dict`
            none = isinstance(value, ast.Constant) and value.value is None
            default = none
            keys = _dict_literal_keys(value) if isinstance(value, ast.Dict) else None
            if isinstance(value, ast.Name):
                visible = visible_dict_keys(value, ctx.names)
                keys = set(visible) if visible is not None else None
            if keys is None and not none:
                return  # a dict we cannot see
            if keys is not None and "use_reentrant" in keys:
                return
            if too_new or HF_KWARGS in kwargs.from_splat:
                pass
            elif isinstance(value, ast.Dict):
                how, message = "entry", f"Add `{quote}use_reentrant{quote}: False`"
            elif none and kwargs.passed(HF_KWARGS):
                how = "set"
        elif too_new is None:
            forwarded = _caller_choice(ctx, node)
            if forwarded is not None and forwarded.annotation == "kwargs":
                how, message = "forward_kwargs", f"Pass the caller's `{HF_KWARGS}` on"
            elif forwarded is not None:
                how, message = "forward", f"Pass the caller's `use_reentrant={forwarded.name}` on"
            else:
                how = "add"
        ctx.report(
            self, node,
            "gradient_checkpointing_enable() without use_reentrant is reentrant: blocks with no-grad inputs get no "
            "gradients",
            fix=Applicability.UNSAFE if how else None, fix_message=message if how else "",
            data={"how": how, "hf": True, "name": forwarded.name if forwarded else "", "quote": quote},
            note=note, decision=self._decision(ctx, node, hf_kwargs=kwargs.passed(HF_KWARGS) or bool(positional),
                                                   hf_default=default),
        )

    def _held_checkpoint(self, ctx: AstContext, statement: ast.Assign) -> None:
        """`self.maybe_ckpt = checkpoint if "ffn" in opts else lambda f, x: f(x)` (or a name so bound), whose
        every use is a call and some call passes no `use_reentrant`: reported at the binding."""
        if len(statement.targets) != 1:
            return
        target = statement.targets[0]
        reference = next((value for value in branches(statement.value) if ctx.qualname(value) == CHECKPOINT), None)
        if reference is None:
            return
        calls = _calls_of_held(ctx, target)
        if not calls or version_guarded(ctx, statement):
            return
        lacking = [c for c in calls if ctx.kwargs(c).complete and not ctx.kwargs(c).passed("use_reentrant")]
        decision = next((d for d in (self._decision(ctx, c) for c in lacking) if d.report), None)
        if decision is None:
            return
        held = ctx.segment(target)
        too_new = use_reentrant_too_new(ctx)
        ctx.report(
            self, reference,
            "checkpoint held here is called without use_reentrant, in reentrant mode: blocks with no-grad inputs get "
            "no gradients",
            fix=None if too_new else Applicability.UNSAFE,
            fix_message="Bind `checkpoint` with `use_reentrant=False` (functools.partial)",
            data={"how": "partial"},
            note=f"called as {held}(...)" + (f"; no fix: {too_new.reason()}" if too_new else ""),
            statement=statement, decision=decision,
        )

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword, set_keyword

        assert detection.data is not None and detection.fix is not None
        data = detection.data
        if data["how"] == "partial":  # the reference held by a name or attribute, bound with the keyword
            assert isinstance(node, (cst.Name, cst.Attribute))
            partial = fctx.imports.reference("functools", "partial")
            bound = cst.parse_expression(
                f"{partial.expr}({fctx.module.code_for_node(node.with_changes(lpar=[], rpar=[]))}, "
                "use_reentrant=False)")
            return PendingFix.unsafe(detection.fix_message, partial.edit,
                                     Replace(node, bound.with_changes(lpar=node.lpar, rpar=node.rpar)))
        assert isinstance(node, cst.Call)
        how, name = data["how"], data["name"]
        message = detection.fix_message
        if not data.get("hf"):
            if how == "star":
                new = _with_star_kwargs(node, f"({name} or {{}})" if data["none"] else name)
            else:
                new = add_keyword(node, "use_reentrant", name if how == "forward" else "False")
            return PendingFix.unsafe(message, Replace(node, new))
        quote = data["quote"]
        non_reentrant = f"{{{quote}use_reentrant{quote}: False}}"
        if how == "entry":
            value = _hf_kwargs_value(node)
            assert isinstance(value, cst.Dict)
            return PendingFix.unsafe(message, Replace(value, _add_dict_entry(value, quote)))
        if how == "set":
            new = set_keyword(node, HF_KWARGS, non_reentrant)
        elif how == "forward_kwargs":
            new = add_keyword(node, HF_KWARGS, HF_KWARGS)
        elif how == "forward":
            new = add_keyword(node, HF_KWARGS, f"{{{quote}use_reentrant{quote}: {name}}}")
        else:
            new = add_keyword(node, HF_KWARGS, non_reentrant)
        return PendingFix.unsafe(message, Replace(node, new))


def _getter_of(ctx: AstContext, func: ast.Name) -> Optional[str]:
    """For a name bound once to what a project function returns (`checkpoint_fn = get_checkpoint_fn()`): the
    function's name as called, when it returns torch's checkpoint and nothing else (FileFacts.checkpoint_getters
    of its module)."""
    value = single_value(func, ctx.names)
    if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)):
        return None
    project, own = ctx.project, ctx.project.own
    getter = value.func
    spelled = ctx.segment(getter)
    qualified = ctx.qualname(getter)
    if qualified is not None:
        return spelled if qualified in project.checkpoint_getters else None
    if not isinstance(getter, ast.Name) or getter.id not in own.checkpoint_getters:
        return None
    definition = local_definition(ctx, getter, value)
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not isinstance(ctx.parent(definition), ast.Module):
        return None  # the facts read the module's top-level functions
    return spelled


def _calls_of_held(ctx: AstContext, target: ast.expr) -> list[ast.Call]:
    """The calls of what `target` holds, when every use of it is a call: `self.<attr>` read on `self` only
    (anywhere in the file: a subclass of it calls it so too), or a name read in the scope that binds it, bound
    there once."""
    uses: list[ast.AST] = []
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        for node in ctx.nodes(ast.Attribute):
            assert isinstance(node, ast.Attribute)
            if node.attr != target.attr or isinstance(node.ctx, ast.Store):
                continue
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                return []  # `other.maybe_ckpt`: what it holds is not followed
            uses.append(node)
    elif isinstance(target, ast.Name):
        owner = ctx.names.binding_scope(target)
        if owner is None or len(owner.bindings.get(target.id, [])) != 1:
            return []
        for node in ctx.nodes(ast.Name):
            assert isinstance(node, ast.Name)
            if node.id == target.id and node is not target and ctx.names.binding_scope(node) is owner:
                if not isinstance(node.ctx, ast.Load):
                    return []
                uses.append(node)
    else:
        return []
    calls: list[ast.Call] = []
    for use in uses:
        parent = ctx.parent(use)
        if not (isinstance(parent, ast.Call) and parent.func is use):
            return []  # handed on, compared, stored: the fix's partial would reach it
        calls.append(parent)
    return calls


def _from_pretrained(ctx: AstContext, receiver: ast.expr) -> bool:
    """`model` is bound, once in its scope, to `<something>.from_pretrained(...)` (through `.to()`/`.cuda()`): a
    Hugging Face model, whatever classes of the project define a method of the same name."""
    if not isinstance(receiver, ast.Name):
        return False
    value = single_value(receiver, ctx.names)
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda"):
        value = value.func.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
        and value.func.attr == "from_pretrained"


def _quote(ctx: AstContext) -> str:
    """The quote character the file's strings use (the one a LibCST fix context reads: core/style.py)."""
    return detect_style(ctx.text, ctx.settings.line_length, "    ").quote


def _peft_enables_again(ctx: AstContext, node: ast.Call) -> bool:
    """LAST_ENABLE refuted: `prepare_model_for_kbit_training(model)` after `model.gradient_checkpointing_enable()`,
    in the same function, with checkpointing left on."""
    if "prepare_model_for" not in ctx.text:
        return False
    receiver = dotted(node.func.value) if isinstance(node.func, ast.Attribute) else None
    if receiver is None:
        return False
    function = ctx.enclosing_function(node)
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if call.lineno <= node.lineno or ctx.qualname(call.func) not in PEFT_PREPARE \
                or ctx.enclosing_function(call) is not function:
            continue
        model = argument(call, "model", 0, ctx.kwargs(call))
        if model is not None and dotted(model) == receiver and _peft_checkpoints(ctx, call):
            return True
    return False


def _peft_checkpoints(ctx: AstContext, call: ast.Call) -> bool:
    """PEFT's `prepare_model_for_kbit_training(model, ...)` enables checkpointing (and makes the inputs require
    grad) unless told `use_gradient_checkpointing=False`."""
    switch = argument(call, "use_gradient_checkpointing", 1, ctx.kwargs(call))
    return not (isinstance(switch, ast.Constant) and not switch.value)


def _trap_can_bite(ctx: AstContext, node: ast.Call) -> Evidence:
    """TRAP_CAN_BITE: adapters on a frozen model whose inputs nothing makes require grad, in the call's function."""
    assert isinstance(node.func, ast.Attribute)
    model = dotted(node.func.value)
    if model is None:
        return UNDECIDED
    function = ctx.enclosing_function(node)
    shown = False
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if call is node or ctx.enclosing_function(call) is not function:
            continue
        before = (call.lineno, call.col_offset) < (node.lineno, node.col_offset)
        func = call.func
        if isinstance(func, ast.Attribute):
            owner = dotted(func.value)
            if func.attr == "enable_input_require_grads" and owner == model:
                return REFUTED
            if func.attr == "requires_grad_" and (owner == model or _embedding_of(owner, model)) \
                    and _turns_on(call):
                return REFUTED  # every parameter, or the embeddings, train: the blocks' inputs require grad
            if func.attr in ADAPTER_METHODS and owner == model:
                if before:
                    return REFUTED  # Transformers sees the adapters and makes the inputs require grad
                shown = True
                continue
        qualified = ctx.qualname(func)
        if qualified in PEFT_PREPARE or qualified in PEFT_WRAP:
            wrapped = call.args[0] if call.args else None
            target = _assigned_to(ctx, call)
            if (wrapped is None or dotted(wrapped) != model) and target != model:
                continue
            if qualified in PEFT_PREPARE:
                if not _peft_checkpoints(ctx, call):
                    continue  # PEFT freezes the model but leaves its inputs alone
                return REFUTED  # PEFT makes the inputs require grad
            if not before:
                return REFUTED  # PEFT wraps a model whose checkpointing is on: it makes the inputs require grad
            shown = True
    return SHOWN if shown else UNDECIDED


def _input_requires_grad(ctx: AstContext, node: ast.Call, sequential: bool) -> bool:
    """FIX_CHANGES: the call's first input is a name that a statement every path to the call runs, in the same
    function and after any rebinding of it, makes require grad (`x.requires_grad_(True)` right before
    `checkpoint(block, x)`)."""
    value = argument(node, "input", 2, ctx.kwargs(node)) if sequential else \
        (node.args[1] if len(node.args) > 1 and not isinstance(node.args[0], ast.Starred) else None)
    if not isinstance(value, ast.Name):
        return False
    name = value.id
    statement: ast.AST = node
    while not isinstance(statement, ast.stmt):
        parent = ctx.parent(statement)
        if parent is None:
            return False
        statement = parent
    if any(isinstance(found, ast.NamedExpr) and _binds(found.target, name) for found in walk_nodes(statement)):
        return False  # `y = checkpoint(f, (x := g(y)))`: a rebinding within the call's own statement (its
        # targets, `x = checkpoint(f, x)`, are bound after the call)
    while True:
        parent = ctx.parent(statement)
        block = next((b for b in _blocks(parent) if any(s is statement for s in b)), None) if parent else None
        if block is None:
            return False
        for earlier in reversed(block[:next(i for i, s in enumerate(block) if s is statement)]):
            if _turns_grad_on(earlier, name):
                return True
            if any(_binds(found, name) or _turns_grad_off(found, name) for found in walk_nodes(earlier)):
                return False
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return False  # the evidence is in the call's own function (or module)
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) or (
                isinstance(parent, ast.Try) and block is not parent.body):
            # a later iteration, or a handler after part of the `try` ran, may reach the call after a rebinding
            if any(_binds(found, name) or _turns_grad_off(found, name) for found in walk_nodes(parent)):
                return False
        elif isinstance(parent, ast.If):
            if any(_binds(found, name) for found in walk_nodes(parent.test)):
                return False
        elif isinstance(parent, (ast.With, ast.AsyncWith)):
            if any(_binds(found, name) for item in parent.items for found in walk_nodes(item)):
                return False
        elif not isinstance(parent, ast.Try):
            return False  # an `except` clause (part of the `try` may have run), `match`: not followed
        statement = parent


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly under a compound statement."""
    return [block for field in ("body", "orelse", "finalbody") if isinstance(block := getattr(node, field, None), list)]


def _binds(node: ast.AST, name: str) -> bool:
    """`node` binds or deletes `name` (an assignment, a loop or `with` target, `:=`, `del`, an import)."""
    if isinstance(node, ast.Name):
        return node.id == name and isinstance(node.ctx, (ast.Store, ast.Del))
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    return isinstance(node, ast.ExceptHandler) and node.name == name


def _turns_grad_on(statement: ast.stmt, name: str) -> bool:
    """`x.requires_grad_(True)`, `x.requires_grad_()`, `x.requires_grad = True`, `x = x.requires_grad_()`."""
    if isinstance(statement, ast.Expr):
        call = statement.value
        return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr == "requires_grad_" and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == name and _turns_on(call)
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return False
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Attribute) and target.attr == "requires_grad":
        return isinstance(target.value, ast.Name) and target.value.id == name \
            and isinstance(value, ast.Constant) and value.value is True
    return isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Call) \
        and isinstance(value.func, ast.Attribute) and value.func.attr == "requires_grad_" \
        and isinstance(value.func.value, ast.Name) and value.func.value.id == name and _turns_on(value)


def _turns_grad_off(node: ast.AST, name: str) -> bool:
    """`x.requires_grad_(False)`, `x.detach_()`, or an assignment to `x.requires_grad` other than True."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == name:
        return node.func.attr == "detach_" or (node.func.attr == "requires_grad_" and not _turns_on(node))
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name)
                   and t.value.id == name and not (isinstance(node.value, ast.Constant) and node.value.value is True)
                   for t in targets)
    return False


def _embedding_of(owner: Optional[str], model: str) -> bool:
    """`owner` is an attribute chain into `model` that names an embedding (`model.text_model.embeddings`)."""
    return owner is not None and owner.startswith(model + ".") and "embed" in owner[len(model):].lower()


def _turns_on(call: ast.Call) -> bool:
    """`requires_grad_()` or `requires_grad_(True)`: the tensor or module now requires grad."""
    value = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
    return value is None or (isinstance(value, ast.Constant) and value.value is True)


def _assigned_to(ctx: AstContext, call: ast.Call) -> Optional[str]:
    """The name or attribute chain `call`'s value is assigned to (`model = get_peft_model(base, config)`)."""
    parent = ctx.parent(call)
    if isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    return None


def _under_autograd(ctx: AstContext, node: ast.Call) -> Evidence:
    """Refuted under no_grad/inference_mode (a `with` block or a decorator) and in an eval-only file."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
                isinstance(item.context_expr, ast.Call) and ctx.qualname(item.context_expr.func) in GRAD_OFF
                for item in ancestor.items):
            return REFUTED
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                ctx.qualname(d.func if isinstance(d, ast.Call) else d) in GRAD_OFF for d in ancestor.decorator_list):
            return REFUTED
    return REFUTED if _inference_script(ctx.text) or ctx.project.evaluated_only else SHOWN


def _can_run(ctx: AstContext, node: ast.Call) -> Evidence:
    """Refuted behind a checkpointing flag the project only sets off (CAN_RUN)."""
    child: ast.AST = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, ast.If):
            flag = _required_flag(ancestor.test, child in ancestor.body)
            if flag is not None and _never_on(ctx, flag):
                return REFUTED
        child = ancestor
    return SHOWN


def _required_flag(test: ast.expr, in_body: bool) -> Optional[str]:
    """The attribute flag (`obj.<flag>`) a branch needs true: `if obj.flag` or `if obj.flag and ...` for the
    body, `if not obj.flag` for the `else`; named like a checkpointing switch."""
    if not in_body:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
            in_body = True
        else:
            return None
    tested = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for value in tested:
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                and CHECKPOINT_OPTION.search(value.attr):
            return value.attr
    return None


def _never_on(ctx: AstContext, flag: str) -> bool:
    """The file sets `flag` only off (at least once), nothing around it gives it another value, and no
    setattr with a computed name could."""
    project = ctx.project
    if not any(c.module for c in project.own.classes.values()):
        return False  # the files around a model file are read for options (ProjectView.options_around)
    if project.option_values(flag) - {OPTION_OFF}:
        return False
    assigned = False
    for statement in ctx.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign):
        assert isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            for found in walk_nodes(target):
                named = (isinstance(found, ast.Attribute) and found.attr == flag) or (
                    isinstance(found, ast.Name) and found.id == flag
                    and isinstance(ctx.parent(statement), ast.ClassDef))
                if not named:
                    continue
                if found is not target or isinstance(statement, ast.AugAssign) or not _off(statement.value):
                    return False
                assigned = True
    if not assigned:
        return False
    return not any(isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "setattr"
                   and len(call.args) > 1 and not (isinstance(call.args[1], ast.Constant)
                                                   and call.args[1].value != flag)
                   for call in ctx.nodes(ast.Call))


def _off(value: Optional[ast.expr]) -> bool:
    return isinstance(value, ast.Constant) and (value.value is None or value.value is False
                                                or (type(value.value) is int and value.value == 0))


def _caller_choice(ctx: AstContext, node: ast.AST) -> "Optional[_Forwarded]":
    """The enclosing function's own `use_reentrant` or `gradient_checkpointing_kwargs` parameter."""
    function = ctx.enclosing_function(node)
    if function is None:
        return None
    for param, default in _parameters(function):
        none = isinstance(default, ast.Constant) and default.value is None
        if param.arg == "use_reentrant":
            return _Forwarded(param.arg, "value", none)
        if param.arg == HF_KWARGS:
            return _Forwarded(param.arg, "kwargs", none)
    return None


def _parameters(function: FunctionNode) -> list[tuple[ast.arg, Optional[ast.expr]]]:
    """Named parameters in order (positional-only, positional, keyword-only) with their defaults."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    return [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]


def _hf_kwargs_value(call: "cst.Call") -> "Optional[cst.BaseExpression]":
    """The `gradient_checkpointing_kwargs` a LibCST call passes: by keyword, else its first positional."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == HF_KWARGS:
            return arg.value
    return next((arg.value for arg in call.args if arg.keyword is None and not arg.star), None)


_GRAD_OFF_TEXT = re.compile(r"\bno_grad\b|\binference_mode\b")
_TRAINING_TEXT = re.compile(r"\.backward\(|\bautograd\.grad\(|\boptim\b|\boptimizer\b|\bTrainer\b|\bRunner\b")
_SCRIPT = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def _inference_script(text: str) -> bool:
    """A script (a `__main__` guard) that runs models under no_grad/inference_mode and trains nothing: the
    modules it defines are not trained here. (`.eval()` alone is no evidence: model files freeze stages
    with it, and are trained by another file.)"""
    return bool(_SCRIPT.search(text) and _GRAD_OFF_TEXT.search(text) and not _TRAINING_TEXT.search(text))


def _dict_literal_keys(value: ast.Dict) -> Optional[set[str]]:
    keys: set[str] = set()
    for key in value.keys:
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return None  # `**other`, a computed key
        keys.add(key.value)
    return keys


@dataclass(frozen=True)
class _Forwarded:
    """A parameter of the enclosing function that carries the caller's checkpointing choice."""

    name: str
    annotation: str  # "value": `use_reentrant`; "kwargs": `gradient_checkpointing_kwargs`
    none: bool  # its default is None


def _with_star_kwargs(node: "cst.Call", code: str) -> "cst.Call":
    """`checkpoint(f, x)` -> `checkpoint(f, x, **(kwargs or {}))`."""
    import libcst as cst

    args = list(node.args)
    if args and not isinstance(args[-1].comma, cst.Comma):
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return node.with_changes(args=[*args, cst.Arg(value=cst.parse_expression(code), star="**")])


def _add_dict_entry(value: "cst.Dict", quote: str = '"') -> "cst.Dict":
    import libcst as cst

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
