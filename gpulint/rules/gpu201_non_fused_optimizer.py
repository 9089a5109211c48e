"""GPU201 non-fused-optimizer: Adam/AdamW/SGD/Adagrad stepping parameter by parameter."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable, Optional

from gpulint.analysis.amp_steps import amp_steps, imports_framework
from gpulint.analysis.ast_context import AstContext, AstKeywordArgs, Detection, arg, dotted, positional_args
from gpulint.analysis.ast_values import following, is_literal, single_value, value_at
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of
from gpulint.analysis.generation import generation_bound
from gpulint.analysis.lr_sweep import LONG_RUN, optimizer_run
from gpulint.analysis.reach import OFF_ENVIRONMENT, RUNS, runs, waits_on_environment
from gpulint.analysis.update_share import trains_remainder
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import (
    ADAPTIVE_RATE_WRAPPERS,
    DTYPE_NAMES,
    FRAMEWORKS,
    FUSED_CAPABLE,
    LIGHTNING_MODULES,
    OPTIMIZER_CLASSES,
    OPTIMIZER_PARAMS,
    SGD_MOMENTUM,
    SGD_WEIGHT_DECAY,
)
from gpulint.core.verification import FUSED_OPTIMIZER, Verification
from gpulint.project.ast_nodes import all_nodes
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.project.layers import MODULE, inline_tensors
from gpulint.project.view import PART, ProjectView, own_accelerated
from gpulint.records import dataclass
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target
from gpulint.rules.gpu001_missing_autocast import AMP_DTYPE, MissingAutocast
from gpulint.rules.gpu002_fp16_without_grad_scaler import Fp16WithoutGradScaler

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

# class -> fix applicability (the torch each needs is in core/floors.py)
FUSED_OPTIMIZERS: dict[str, Applicability] = {
    "Adam": Applicability.SAFE,
    "AdamW": Applicability.SAFE,
    "SGD": Applicability.UNSAFE,
    "Adagrad": Applicability.UNSAFE,
}
assert tuple(FUSED_OPTIMIZERS) == FUSED_CAPABLE
OPTIMIZER_NAMES = OPTIMIZER_CLASSES
_SPARSE = re.compile(r"\bsparse\s*=\s*True\b")

TORCH_OPTIMIZER = Premise(
    "torch-optimizer",
    "the call builds torch's Adam, AdamW, SGD or Adagrad (through any alias, a name assigned the class, "
    "or a registry dict of them) over dense floating-point parameters, with every keyword visible "
    "(`**opt_args` dicts built in view count): not one tensor optimised alone (`[latent]`, "
    "`[nn.Parameter(...)]`, `[torch.zeros(n, requires_grad=True)]`, the `.parameters()` of an inline one-tensor "
    "layer such as `nn.Embedding(n, d)` or of `model.get_input_embeddings()`, param-group dicts that hold one "
    "tensor between them, `[{\"params\": p}]` where `p` is bound only by a loop over `model.parameters()` or is "
    "the one parameter of a function registered only as a post-accumulate-grad hook: one launch either way), "
    "not sparse gradients, "
    "not `differentiable=True`, not an optimizer MS-AMP replaces.")
FUSED_DEVICE = Premise(
    "fused-device",
    "the parameters live where torch has a fused kernel and it pays: CUDA or MPS (2.5 on). Shown where some "
    "file of the project shows an accelerator (CUDA evidence, MPS, a framework that picks the device): the "
    "model may live there. Undecided where none does (a CPU-only project: blind13's SimGNN, blind25's "
    "CapsGNN; the CPU kernels of torch 2.4 save nothing measurable over its small models) and on an XPU "
    "alone; refuted on a TPU (`torch_xla`).")
FUSED_EXISTS = Premise(
    "fused-exists",
    "every torch the project supports has the fused kernel: the floor it declares (`torch-version`, or "
    "its requirements, pyproject, setup.py, setup.cfg, environment.yml) is at least the version that "
    "added it (Adam 1.13, AdamW 2.0, SGD 2.3, Adagrad 2.12; and 2.4 for the CPU kernels, unless the script "
    "shows CUDA and never names the CPU as a device; CUDA named only as parameters' defaults, `device: "
    "torch.device = torch.device('cuda')` with no `.cuda()` or `torch.cuda` test in the file, is the caller's "
    "choice and shows none: blind13's nnUNet trainer variants, launched with `-device cpu/mps/cuda` on torch "
    "2.1, where fused=True raises for CPU and MPS parameters; refuted there rather than fixed with "
    "`fused=(self.device.type == 'cuda')`, which needs the parameters' device in view), or it declares none "
    "(a stale pin, one its own imports contradict, declares none). Where only the CPU kernels are missing "
    "and every \"cpu\" or \"mps\" the file names as a device is the fallback of `torch.cuda.is_available()` "
    "(the false branch of its conditional expression, or the `elif`/`else` of `if torch.cuda.is_available():`), "
    "it holds with `fused=torch.cuda.is_available()` (the parameters are off CUDA only where CUDA is not); "
    "likewise where "
    "each is the fallback of one flag test whose true branch is a CUDA device (`torch.device('cuda' if "
    "args.cuda else 'cpu')`, `f\"cuda:{args.gpu}\" if args.gpu >= 0 else \"cpu\"`): a name or attribute chain, "
    "`not` one, one compared with literals, or `and`/`or` of such tests and `torch.cuda.is_available()`, read "
    "in the function (or at module level) that builds the optimizer with nothing it reads bound again between. "
    "It holds with `fused=<the test as written>` where the test is a bool (a comparison, an argparse "
    "`store_true`/`store_false` option every store of the file keeps a bool, a name bound only to bools), "
    "else with `fused=bool(<the test>)`. In a LightningModule's own `configure_optimizers` it holds with "
    "`fused=self.device.type == \"cuda\"`: Lightning moves the module to its device before calling it; so "
    "it does in a method over `self.model` that the `__init__` of its class's base moved to `self.device`, "
    "a `torch.device` (built-on-device). A project "
    "pinned to an older torch would get a "
    "TypeError. Refuted too when "
    "the code runs only on a torch older than that: it, or a module it imports, unconditionally imports a "
    "module gone by then (`torch._six`, gone in 2.0; `torchtext.legacy`, gone with 1.11; torchtext's "
    "`Field`/`BucketIterator`, gone with 1.8; any torchtext, whose last release, 0.18, pairs with torch 2.3: no "
    "CPU kernels) or fills with uint8 masks it makes "
    "(`dec_attn_mask = torch.triu(...).byte()` handed to `masked_fill`: an error from 2.1, so no fused SGD, "
    "2.3); it asserts an older major version at module level (`assert torch.__version__.split('.')[0] == "
    "'1'`: below 2.0; also in the `__main__` block of a script no project file imports); it, or a module it "
    "imports, reads a loss it calls `.backward()` on (bound from a loss call) as `loss.data[0]`, an IndexError "
    "from 1.0 on; it, or a module it imports, calls `.next()` on the iterator of a DataLoader (`iter(loader)"
    ".next()`, the loader built in the file or returned by a function of a project module it imports: an "
    "AttributeError from 1.13 on); a file of the project builds its extension with `torch.utils.ffi`, gone in "
    "1.0; or it builds "
    "or imports a native extension pinned to C++14 (`cpp_extension.load(..., extra_cflags=['-std=c++14'])`, a "
    "setup.py `CUDAExtension` whose `extra_compile_args` name it: torch 2.1's headers need C++17, so no CPU "
    "kernels, 2.4), through any chain of imports that always run (a `try`/`except ImportError` or `if`/`else` "
    "counts where every branch imports such code). A helper module that only defines (no `__main__` block, "
    "nothing run at import; optional imports in a `try` count) outside any package others install (no "
    "`__init__.py` beside it, or no setup.py, setup.cfg or pyproject.toml that builds a distribution at or "
    "above its folder) runs only under the project files that import it: where each of them has such a "
    "ceiling, through its own code or what it imports, so does it (LSTNet's Optim.py, imported only by a "
    "main.py that reads `loss.data[0]`; VideoMAE's optim_factory.py, imported only by scripts that import a "
    "utils.py importing `torch._six`; ibot's, in a package folder nothing packages, the same way).")
BUILT_ON_DEVICE = Premise(
    "built-on-device",
    "where the project may run on a torch before 2.4 (its declared floor is below 2.4, or its code runs only on "
    "2.3 or older: its torch ceiling, such as any torchtext import, whose last release, 0.18, pairs with torch "
    "2.3), the parameters are on the device the fix targets when the optimizer is built: before 2.4 the "
    "fused constructor checks their devices and raises for CPU parameters. Shown where the module whose "
    "`.parameters()` (or `named_parameters()`) the optimizer holds, or one it is an attribute of, is moved to "
    "a device (`.cuda()`, `.to(device)`, not a dtype, `accelerator.prepare(model)`, Lightning Fabric's "
    "`fabric.setup_module(model)`/`setup(model)`, or built inside `with fabric.device:` or "
    "`with torch.device(\"cuda\"):`) in the optimizer's own "
    "call or earlier in the same function (at module level, earlier cells of a notebook count) with no "
    "binding of it between (a wrapper over it, `nn.DataParallel(model)`, keeps it moved), or in a "
    "LightningModule's own `configure_optimizers` (Lightning moves the module first), or in a method of a "
    "class over an attribute of `self` that the `__init__` of its one base (in the file, or a project module's "
    "class a `from` import binds) moves at its top level (`self.model = self._build_model().to(self.device)`, "
    "binding it nowhere else, where `self.device` is bound once before to `torch.device(...)` or to what a "
    "method of the base returns, every return a `torch.device`), while the class runs that `__init__` first "
    "(no `__init__` of its own, or one that starts with `super().__init__(...)`), binds neither attribute, "
    "overrides no such method and has no subclass in its file (blind25: iTransformer's experiments, whose "
    "Exp_Basic chooses CUDA or the CPU by `--use_gpu`; the fix is `fused=self.device.type == \"cuda\"`, "
    "or `fused=True` after `.cuda()`); refuted where such "
    "moves all come after the constructor (`model = model.to(device)` in a later notebook cell); undecided "
    "otherwise (new LoRA layers that `accelerator.prepare` moves after the optimizer, a model moved in "
    "another function). Shown with no torch before 2.4 in view (a floor of 2.4 or more, or none declared).")
STEP_MATTERS = Premise(
    "step-matters",
    "the optimizer step is part of a loop that waits on the device: refuted in reinforcement-learning code (the "
    "file or a module that imports it imports an environment package, anywhere in that file: inside a "
    "function or a notebook cell counts too), where the step is nothing next to the simulator, and where every "
    "training-step loop of the file waits on autoregressive generation on each "
    "iteration (`model.generate(...)` or a rollout engine's `.rollout(...)` in the step loop's body, a same-file "
    "function it calls, or a loop around it; not under an interval test such as `if step % N`): LLM reinforcement "
    "learning samples hundreds of tokens per update, and a fused step saves a millisecond of seconds; refuted "
    "for an optimizer handed to apex's `LARC` or torchlars' `LARS` (resolved through the imports; directly or "
    "through the name it is bound to), whose `step()` runs its own Python loop over the parameters (two norms "
    "per tensor, and in apex a host-syncing test of them) before the inner step: that loop stays the "
    "optimizer's cost whatever the inner step does (undecided where the wrap sits in a branch the optimizer "
    "is not in, `if args.lars:`; a class of the project's own named `LARC` is not known to loop and leaves "
    "it shown); "
    "undecided where the file or a module it imports (two levels deep) freezes a whole network so that only "
    "a small part trains (a linear probe that keeps `fc.weight`/`fc.bias`, a whole model frozen and an "
    "optimizer over `filter(lambda p: p.requires_grad, ...)`, a loop over `named_parameters()` that "
    "freezes every parameter whose name lacks an adapter word such as `lora` or `adapter` (LoRA), a module "
    "that freezes the encoder it wraps with False or a flag the file never sets True): "
    "the step then updates a handful of tensors next to a large frozen forward; undecided too where the "
    "optimizer holds the parameters of one name (`head.parameters()`) that its function binds only to a "
    "module class of the project of one or two Linear layers and nothing else with weights "
    "(norms, pooling, dropout aside; no base class but nn.Module, no loop building layers), moved or wrapped "
    "(`.cuda()`, DistributedDataParallel): a logistic-regression probe over features computed elsewhere. "
    "A freeze of a part (`model.embeddings`) or of a network beside the trained one (an EMA teacher, a VAE, "
    "a loss's network: in a class named like a loss, or in a class of the file that only such loss classes "
    "build, a perceptual loss's VGG feature extractor) leaves it shown.")
UPDATE_SHARE = Premise(
    "update-share",
    "the optimizer updates the bulk of the parameters its step trains through: refuted where the function that "
    "builds it (the module, for one built at module level) freezes a whole network (`unet.requires_grad_(False)`, "
    "or a loop over `model.parameters()`/`named_parameters()` turning `requires_grad` off for every parameter, "
    "for every one but a few named ones, literal or formatted (`'%s.weight' % keyword`), or for every one whose "
    "name lacks an adapter word such as `lora`), or the file calls into peft (`LoraConfig(...)`, "
    "`get_peft_model`), and every parameter source the optimizer holds is the trainable remainder: what a "
    "callee named for LoRA, adapters, prompts or prefixes returns (`unet_lora_params, _ = "
    "inject_trainable_lora(unet)`), the parameters that still require grad (`filter(lambda p: p.requires_grad, "
    "model.parameters())` or `[p for p in model.parameters() if p.requires_grad]`) of a network frozen there "
    "(of any network where the file calls into peft), the parameters of a part of a network frozen there "
    "(`model.fc.parameters()`), or a model's input embedding table (`get_input_embeddings().parameters()`). The "
    "sources are read through lists, param-group dicts (their `\"params\"`), `+`, conditional expressions, `*` "
    "spreads, `itertools.chain`, `list`, `tuple` and every binding of a name in that function (`+=`, `.append` "
    "and `.extend` included). The step then runs the frozen network's forward and backward and updates a "
    "sliver of it (rank-4 LoRA adapters of a frozen UNet, a linear probe's head). A freeze of a part "
    "(`model.embeddings.requires_grad_(False)`) freezes no network, and an optimizer that also holds any other "
    "parameters (`unet.parameters()` next to a frozen VAE and text encoder) leaves it shown.")
FUSED_KEPT = Premise(
    "fused-kept",
    "the optimizer keeps the flag it is built with: refuted when the statement right after its construction "
    "block loads a saved state into it unconditionally (`optimizer.load_state_dict(checkpoint[...])` in the "
    "same block, not under an `if`, or under an `if` that only asks whether the saved file carries the key: "
    "`if \"optimizer\" in ckpt:` where `ckpt` holds what a load call returned, its last assignment before in the "
    "same block, never an empty `{}` left by an option): `load_state_dict` restores the saved param groups, "
    "`fused` included, so the flag of the optimizer that saved them wins (checked on torch 2.13: `fused` goes "
    "from True to None).")
STEPPED = Premise(
    "stepped",
    "the optimizer is stepped: refuted for one bound to a name at module level that is bound again further "
    "down before any statement between steps it, hands it to a call or stores it (only `.param_groups` and "
    "`.zero_grad()` read), while no function reads that global name: a notebook cell that builds an optimizer "
    "only to plot a learning-rate schedule (blind9: LLMs-from-scratch's appendix D); refuted too for one bound "
    "to a local name of a function, or to `self.<attr>` in a method, where every read of that binding only "
    "reads or loads its state or rate (`state_dict()`, `load_state_dict()`, `param_groups`, `zero_grad()`, "
    "`print`), never `.step`, and never hands it on (an argument, a return, a container, another name): a "
    "checkpoint-conversion script that saves an optimizer's empty state. For an attribute the reads are those "
    "of every method an instance may run: the class's own, those of the classes of the file derived from it, "
    "and those its bases (classes of the file, one each) define and it neither overrides nor reaches through "
    "`super()`; shown where any of them hands the instance on, reads attributes by name (`getattr`), or the "
    "file spells the attribute on anything else (`trainer.optimizer.step()`), and where a base is not a class "
    "of the file. Code in other modules is not read: an instance's attribute stepped from another file is "
    "missed.")
WORK_TO_FUSE = Premise(
    "work-to-fuse",
    "the update has several element-wise operations per parameter for one kernel to merge: refuted for SGD "
    "over `model.parameters()` (or a list or filter of them) with no momentum, no weight decay and no Nesterov, "
    "whose foreach update is already a single multi-tensor add (`torch._foreach_add_`), unless a GradScaler "
    "drives the step (as for scaler-safe): a fused step then skips on device, without the `.item()` sync "
    "`scaler.step` makes on `found_inf` each step, and folds the unscale (undecided where a framework that may "
    "scale runs the loop); param groups may set their own momentum, so a list of dicts or a name built "
    "elsewhere leaves it shown, and so do `foreach=False` (one add kernel per parameter) and `maximize=True` "
    "(a negation first). Undecided where the parameters are those of one name or attribute (`model.parameters()`, "
    "`self.model.parameters()`, the model moved or wrapped, or `self.parameters()` in a method of a class of the "
    "file that no class of the file subclasses) bound only to instances of project classes, in this "
    "module or another, that visibly hold at most 4 tensors (FEW_TENSORS) between them: `nn.Parameter`, the "
    "literal entries of an `nn.ParameterDict`/`ParameterList`, an `nn.Embedding` (one each), a Linear (weight and "
    "bias: two), a norm (two), and the project classes built (counted alike); read in `__init__` and the helpers "
    "it calls once, over nn.Module alone, with no loop, comprehension or lambda, no other layer with weights, "
    "no function handed `self`, no layer added outside `__init__`, and no attribute bound to something unread "
    "that the class calls or uses as a module (an encoder handed in; an optimizer, scheduler or GradScaler it "
    "keeps holds no layer), no container attribute filled by key or index unless every binding of it in the "
    "class is a plain Python list, tuple or dict written out (`self.layers_out = [None] * (n + 1)` then "
    "`self.layers_out[0] = self.user_emb`: nn.Module registers nothing stored there); a class not read in full "
    "is not counted. "
    "Two embedding tables of a matrix-factorisation or LightGCN recommender, or a 4-tensor GCN: a fused kernel "
    "replaces the update's per-tensor launches, and over so few tensors there are at most a handful to save. "
    "For an attribute, every binding in the class's methods must be such a class, a torch.nn module written "
    "inline whose layers count alike (`self.model = nn.Sequential(nn.Linear(d, k), nn.Softmax(dim=-1))`: two), "
    "a move of the attribute itself or a deep copy of it (`self.model = best` after "
    "`best = copy.deepcopy(self.model)`), and no class of the file derives from it (what a base class, or a "
    "subclass in another module, binds is not read). An attribute of such a name counts too "
    "(`model.fc.parameters()`, a linear probe over a frozen encoder): each class of this file the name is "
    "bound to, over nn.Module alone, must bind it so (`self.fc = nn.Linear(2048, n)`: two), and nothing else "
    "in the file may bind that attribute (`model.fc = ...`). Refuted where the file configures DeepSpeed ZeRO "
    "for every config it writes (a dict with `\"zero_optimization\": {\"stage\": N}`, N at least 1, a literal or "
    "a conditional expression whose test compares a command-line option with a literal and is decided by the "
    "option's argparse default: `0 if args.dp == 1 else 3` with `--dp` defaulting to 8): ZeRO hands the torch "
    "optimizer one flat fp32 partition per param group, so it steps one tensor per group and there is no "
    "loop over parameters for a fused kernel to replace (blind12: OpenLMLab/LOMO's `--optim adamw`). "
    "Refuted where every `.step()` of an optimizer bound to `self.<attr>` runs in methods of its class that the "
    "class compiles: a method decorated `@torch.compile` or rebound to its compiled self "
    "(`self._update = torch.compile(self._update)`), or one that only such methods call (`self.update_pi(...)` "
    "inside the compiled update): inductor traces the update into its own fused kernels, so `fused=True` has "
    "no loop left to replace (blind21: tdmpc2, `capturable=True` under `mode=\"reduce-overhead\"`); undecided "
    "where the compile sits under a test (`if cfg.compile:`), and shown where a step is read outside the "
    "class or a method of that name is defined twice.")
SCALER_SAFE = Premise(
    "scaler-safe",
    "for SGD with momentum, no GradScaler drives the step (here, in a caller, in a module it or a caller imports "
    "that creates or steps through one, or through a framework that may scale): fused SGD's momentum buffer is "
    "garbage after a skipped first step. For every optimizer, no FSDP ShardedGradScaler is created or imported "
    "in the file, in a module it imports (two levels deep) or in one that imports it: the fused path of "
    "`scaler.step` skips the cross-rank inf check, so ranks step apart (bench/fsdp_fused_scaler.py).")


class NonFusedOptimizer(Rule):
    code = "GPU201"
    name = "non-fused-optimizer"
    habit = "fused-optimizers"
    summary = "Adam/AdamW/SGD/Adagrad without fused=True"
    impact = "optimizer step 22 -> 8 ms (deepmd-kit#4463); +1.6-3.6 % Llama-8B throughput (torchtitan#881)"
    needles = ("Adam", "SGD", "Adagrad")
    ast_needles = (tuple(sorted(OPTIMIZER_NAMES)),)
    target = Target.NOT_CPU_ONLY
    in_tests = False
    fix = Applicability.SAFE
    fix_detail = "safe (Adam, AdamW); unsafe (SGD, Adagrad)"
    verification = Verification(FUSED_OPTIMIZER, ("optimizer",), "the optimizer built with fused=True steps",
                                lambda kind, details: details.get("fused") is True)
    docs = RuleDocs(
        what="""
        Checks for `torch.optim.Adam`, `AdamW`, `SGD` and `Adagrad` constructed without a
        `fused` argument (also when `foreach=True` is passed: fused is faster still), also
        through a name assigned the class (`optimizer_class = torch.optim.AdamW`) or a registry
        dict of torch optimizers (`OPTIMIZERS[name](...)`).
        """,
        why="""
        Without `fused`, PyTorch picks the multi-tensor `foreach` path on CUDA, or a
        per-parameter Python loop; the fused implementation updates every parameter in
        a single kernel per dtype and device. Measured gains: optimizer step 22 ms → 8 ms
        (2.75x, deepmodeling/deepmd-kit#4463, about 3 % end to end); +1.6–3.6 % throughput
        on Llama-8B training (pytorch/torchtitan#881). Small models may see no gain
        (pytorch/pytorch#101291). Losses match the unfused optimizer to the last bits:
        ≤2.4e-7 absolute over 50 Adam steps, measured on CPU. The gain is a share of the
        optimizer step, so it needs a step worth shortening: where a whole network is frozen and
        only a head trains (a linear probe keeping `fc.weight` and `fc.bias`, a module that freezes
        the pretrained encoder it wraps, a LoRA loop that freezes every parameter whose name lacks
        `lora`), or where the optimizer holds only a small head (a `RegLog` module of one Linear layer
        over features a frozen network computes under `no_grad`), the step updates a handful of
        tensors next to a large frozen forward, and the finding is left to `strictness = "pedantic"`;
        so is an optimizer over a model that visibly holds at most four tensors (two embedding
        tables of a matrix-factorisation or LightGCN recommender, with or without a Linear
        predictor; a probe's `model.fc` or a trainer's inline `nn.Sequential` head of one or two
        Linear layers), where there are at most a handful of per-tensor launches to save.
        Where the function that builds the optimizer freezes a whole network and the optimizer
        holds only what remains trainable of it (the LoRA adapters `inject_trainable_lora(unet)`
        returns after `unet.requires_grad_(False)`, a probe's head, the parameters of a peft model
        that still require grad), the update is a sliver of a step that runs the frozen network,
        and the finding is not reported (update-share). Nor where the file's DeepSpeed config
        turns ZeRO on (`"zero_optimization": {"stage": 3}`): DeepSpeed hands the optimizer one
        flat partition per param group, and there is no loop over parameters to replace.
        An optimizer wrapped by apex's `LARC` or torchlars' `LARS` is not reported: the wrapper's
        own per-parameter Python loop (two norms per tensor, and in apex a host-syncing test) stays
        the step's cost. Where every step first samples completions from the policy
        (`model.generate(...)` or a rollout engine's `.rollout(...)` in LLM reinforcement
        learning), the step is a millisecond of several seconds and is not reported; nor is an
        optimizer whose every step the file shows (`.step()` on the name or `self.` attribute it is
        bound to, never handed on) waits on an environment (off-environment: an agent's update
        between two simulated transitions).
        """,
        example="""
        import torch

        model = model.cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        """,
        use_instead="""
        import torch

        model = model.cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        """,
        fix_safety="""
        Safe for Adam and AdamW (last-bit differences only). Unsafe for SGD (fused SGD
        needs torch 2.3) and Adagrad (fused on CUDA only from torch 2.12). With
        `torch-version` set, a fix that needs a newer torch is not offered. `foreach=True`
        is replaced, since torch rejects `fused=True` together with it. No fix when the class
        may be another library's optimizer (`optimizer_class = bnb.optim.AdamW8bit` on one
        branch: it has no `fused`). Not reported with `differentiable=True`, with sparse
        gradients (`sparse=True` embeddings), for a single tensor optimised on its own (also a
        model's input embedding table, `get_input_embeddings().parameters()`, and one optimizer per
        parameter, `[{"params": p}]` in a loop over `unet.parameters()` or in a post-accumulate-grad
        hook), for
        optimizers MS-AMP replaces, on a TPU (`torch_xla`: fused kernels are CUDA/CPU only), in
        test files, for an optimizer that only steps in a learning-rate range test (a loop that raises
        the rate geometrically, records it and stops when the loss diverges), for one built in code that
        never runs (a function nothing in its script reaches, a private method such as an evaluation
        class's `_select_optimizer` that nothing calls), and never for SGD with momentum where a
        GradScaler exists in the file or in a module that imports it, or where a framework
        that may scale the loss (Accelerate, Lightning, DeepSpeed) runs the loop: fused SGD
        with momentum leaves its momentum buffer uninitialised when the first scaled step
        overflows (weights blew up within 3 steps, measured on CPU). Where gpulint's own float16
        fix (GPU001/GPU002) adds a GradScaler in the same run, in the file or in a module it imports
        (two levels deep) that trains with an unscaled step, SGD with momentum is reported
        without a fix, and not at all once the scaler exists. SGD without momentum keeps no
        buffer and is reported under a scaler too. Plain SGD over `model.parameters()`, with no
        momentum, weight decay or Nesterov, is one `torch._foreach_add_` already, and is not
        reported unless a GradScaler drives it (the fused step drops the scaler's per-step
        `found_inf.item()` sync). Not reported where FSDP's ShardedGradScaler is created or imported
        (in the file, in a module it imports, two levels deep, or in one that imports it), and no
        optimizer gets a fix under FSDP with another GradScaler or where gpulint's own
        mixed-precision fix writes a ShardedGradScaler in the same run: the fused
        path of `scaler.step` checks for inf/NaN on each rank's own gradient shard, skipping the
        all-reduce that ShardedGradScaler does in `unscale_`, so one rank steps while another
        skips and the loss scales split; calling `scaler.unscale_(optimizer)` first raises with
        a fused Adam in torch 2.13 (both reproduced on two CPU ranks: bench/fsdp_fused_scaler.py).
        """,
        premises=(TORCH_OPTIMIZER, FUSED_DEVICE, FUSED_EXISTS, BUILT_ON_DEVICE, STEP_MATTERS, UPDATE_SHARE,
                  OFF_ENVIRONMENT, SCALER_SAFE, LONG_RUN, WORK_TO_FUSE, FUSED_KEPT, STEPPED, RUNS),
        fix_cases=(
            FixCase("Adam / AdamW: `fused=True`",
                    Applicability.SAFE, "aliases.py"),
            FixCase('a torch below 2.4 (no fused CPU kernels) where the device is `"cuda" if '
                    'torch.cuda.is_available() else "cpu"`: `fused=torch.cuda.is_available()`',
                    Applicability.SAFE, "cpu_fallback_on_old_torch_fused_when_available.py"),
            FixCase("a torch below 2.4 in a LightningModule's own `configure_optimizers` (Lightning moves the "
                    'module to its device first): `fused=self.device.type == "cuda"`',
                    Applicability.SAFE, "lightning_configure_optimizers_on_old_torch_fused_on_its_device.py"),
            FixCase("the same in a method over `self.model` that the `__init__` of its class's base moved to "
                    "`self.device`, a `torch.device` a flag makes CUDA or the CPU",
                    Applicability.SAFE, "old_torch_base_init_moves_to_its_device_fused_on_it.py"),
            FixCase("the same where MPS and the CPU are the `elif`/`else` branches of `if torch.cuda.is_available():`",
                    Applicability.SAFE, "mps_and_cpu_fallbacks_on_old_torch_fused_when_available.py"),
            FixCase("the same where a `store_true` option chooses (`\"cuda\" if args.cuda else \"cpu\"`): "
                    "`fused=args.cuda`",
                    Applicability.SAFE, "flag_fallback_on_old_torch_fused_with_flag.py"),
            FixCase("the same where a flag of unknown type chooses (`if use_gpu:`): `fused=bool(use_gpu)`",
                    Applicability.SAFE, "flag_of_unknown_type_fused_with_bool.py"),
            FixCase("the same where a comparison chooses (`args.device == \"cuda\"`, `args.gpu >= 0`): the "
                    "comparison as written",
                    Applicability.SAFE, "device_compared_on_old_torch_fused_with_comparison.py"),
            FixCase("`foreach=True` replaced by `fused=True` (torch rejects both)",
                    Applicability.SAFE, "foreach_replaced.py"),
            FixCase("SGD without momentum, even under a GradScaler",
                    Applicability.UNSAFE, "sgd_without_momentum_under_scaler.py"),
            FixCase("`optimizer_class` may be another library's optimizer (no `fused` argument)",
                    None, "optimizer_class_maybe_other_library.py"),
            FixCase("FSDP where gpulint's GPU001 fix writes a ShardedGradScaler in the same run: the two fixes never "
                    "combine into a fused optimizer under it",
                    None, "fsdp_with_gpulint_float16_fix_stays_unfused.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            self._check(ctx, node)

    def _check(self, ctx: AstContext, node: ast.Call) -> None:
        classes = self._optimizer_classes(ctx, node.func)
        if not classes:
            return
        torch_classes = [c for c in classes if c is not None]
        if not torch_classes:
            return
        names = sorted({OPTIMIZER_NAMES[c] for c in torch_classes})
        kwargs = ctx.kwargs(node)
        if not kwargs.complete or kwargs.passed("fused"):
            return
        if kwargs.passed("differentiable") and not is_literal(ctx, kwargs.get("differentiable"), "False"):
            return
        foreach = kwargs.get("foreach")
        if kwargs.passed("foreach") and not is_literal(ctx, foreach, "True", "False", "None"):
            return  # an explicit, computed choice of implementation
        if ctx.analysis(_names_sparse):
            return  # sparse gradients: fused kernels reject them
        if _single_tensor(ctx, node, kwargs):
            return  # one tensor (a latent or an embedding optimised at inference): nothing to fuse
        project = ctx.project
        if project.own.replaces_optimizers or project.replacer_callers:
            return  # MS-AMP swaps the optimizer for its own implementation: `fused` never reaches torch
        fixable = len(torch_classes) == len(classes)
        note = ""
        too_new = self._too_new(ctx, names)
        fused_value = "True"
        fallback = ctx.analysis(_device_by_availability) if too_new is not None else None
        on_cuda = _fused_where(ctx, fallback, node) if fallback is not None else None
        if on_cuda is None and too_new is not None:
            on_cuda = _lightning_device(ctx, node)
        if on_cuda is None and floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling,
                                                  [floors.FUSED_CPU]) is not None:
            on_cuda = _inherited_fused(ctx, node)  # a base class's __init__ put the model on `self.device`
        if on_cuda is not None and self._cuda_kernels(ctx, names):
            # the CPU kernels (2.4) are missing, the CUDA ones are there, and the parameters sit on the CPU
            # only where CUDA is not available, or the flag that chose the device is off: fused exactly when
            # the parameters are on CUDA, spelled as the file tests it
            too_new = None
            fused_value = on_cuda
        scaler_safe: Evidence = SHOWN
        momentum = "SGD" in names and _has_momentum(ctx, node, kwargs)
        # the scaler may live in a module this one hands the optimizer to (`train_one_epoch(..., optimizer,
        # scaler)` in engine.py), so a module it imports that scales counts too
        scaled = bool(project.scaler or project.scaler_importees or project.scaler_beside_callers)
        if momentum and (scaled or _framework_owned(ctx)):
            scaler_safe = REFUTED  # fused SGD + GradScaler: momentum buffer garbage after a skipped first step
        if project.own.sharded_scaler or project.sharded_scaler_around:
            scaler_safe = REFUTED  # a fused step under ShardedGradScaler skips the cross-rank inf check
        work_to_fuse: Evidence = SHOWN
        held = _held_classes(ctx, node)
        if names == ["SGD"] and not scaled and _plain_sgd(ctx, node, kwargs):
            # one foreach add already; under a scaler the fused step still drops scaler.step's found_inf
            # .item() sync and folds the unscale, and a framework may scale: unknown
            work_to_fuse = UNDECIDED if _framework_owned(ctx) else REFUTED
        elif ctx.analysis(_zero_partitioned):
            work_to_fuse = REFUTED  # DeepSpeed steps one flat partition per param group: one tensor each
        elif _few_tensors(ctx, held):
            work_to_fuse = UNDECIDED  # a handful of tensors: a handful of launches to save
        if work_to_fuse is SHOWN:
            work_to_fuse = _compiled_steps(ctx, node)  # torch.compile already fuses the update
        built_on_device = _built_on_device(ctx, node)
        decision = self.decide({TORCH_OPTIMIZER: SHOWN, FUSED_DEVICE: _fused_device(project),
                                FUSED_EXISTS: REFUTED if too_new is not None else SHOWN,
                                BUILT_ON_DEVICE: built_on_device,
                                STEP_MATTERS: _step_matters(ctx, node, held),
                                UPDATE_SHARE: REFUTED if trains_remainder(ctx, node) else SHOWN,
                                OFF_ENVIRONMENT: _steps_off_environment(ctx, node), SCALER_SAFE: scaler_safe,
                                WORK_TO_FUSE: work_to_fuse, FUSED_KEPT: REFUTED if _state_loaded_at_once(ctx, node)
                                else SHOWN, LONG_RUN: optimizer_run(ctx, node),
                                STEPPED: REFUTED if _rebound_unstepped(ctx, node) or _never_stepped(ctx, node)
                                else SHOWN, RUNS: runs(ctx, node)})
        if not decision.report:
            return
        if momentum and may_gain_grad_scaler(ctx):
            fixable = False  # gpulint's own mixed-precision fix (GPU001/GPU002) adds a GradScaler in this run
            note = ("no fix: gpulint's mixed-precision fix adds a GradScaler to this file or a module it imports, "
                    "and fused SGD with momentum is unsafe under one")
        if fixable and not note and self._sharded_scaler(ctx):
            fixable = False
            note = ("no fix: under FSDP's ShardedGradScaler a fused optimizer skips the cross-rank inf check, and "
                    "with scaler.unscale_() first it raises (bench/fsdp_fused_scaler.py)")
        spelled = " / ".join(names)
        if len(classes) > len(torch_classes):
            note = (f"no fix: {ctx.segment(node.func)} is not always a torch optimizer here; pass fused=True "
                    f"only where it is {spelled}")
        elif not isinstance(node.func, ast.Attribute) and ctx.qualname(node.func) is None:
            spelled = f"{ctx.segment(node.func)} ({spelled})"
        if fixable and not note and too_new is not None:
            note = f"no fix: {too_new.reason()}"
        if fixable and not note and built_on_device is not SHOWN:  # pedantic: the device when built is unknown
            note = "no fix: before torch 2.4 fused=True raises for CPU parameters; these are not shown on the GPU yet"
        replace_foreach = kwargs.passed("foreach") and is_literal(ctx, foreach, "True")
        offered = fixable and not note and "foreach" not in kwargs.from_splat
        unsafe = any(FUSED_OPTIMIZERS[o] is Applicability.UNSAFE for o in names)
        ctx.report(
            self, node, f"{spelled} without fused=True: a fused kernel would replace the loop over parameters",
            fix=(Applicability.UNSAFE if unsafe else Applicability.SAFE) if offered else None,
            fix_message=f"Replace `foreach=True` with `fused={fused_value}`" if replace_foreach
            else f"Add `fused={fused_value}`",
            data={"replace_foreach": replace_foreach, "fused": fused_value}, note=note, decision=decision,
        )

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword, set_keyword

        assert isinstance(node, cst.Call) and detection.fix is not None
        value = str(detection.data.get("fused", "True")) if detection.data else "True"
        if detection.data and detection.data.get("replace_foreach"):
            new = set_keyword(node, "fused", value, rename_from="foreach")
        else:
            new = add_keyword(node, "fused", value)
        return PendingFix(detection.fix, detection.fix_message, (Replace(node, new),))

    def _optimizer_classes(self, ctx: AstContext, func: ast.expr) -> list[Optional[str]]:
        """The torch optimizer classes a callee may be (None for anything else it may be); [] if none.

        `torch.optim.AdamW`, an alias of it, a name assigned torch optimizer classes
        (`optimizer_class = torch.optim.AdamW`), or a registry dict of them (`OPTIMIZERS[name]`).
        """
        qualified = ctx.qualname(func)
        if qualified in OPTIMIZER_NAMES:
            return [qualified]
        project = ctx.project
        if qualified is not None:
            return list(project.optimizer_classes(qualified))
        names = ctx.names
        if isinstance(func, ast.Subscript) and isinstance(func.value, (ast.Name, ast.Attribute)):
            registry = single_value(func.value, names) if isinstance(func.value, ast.Name) else None
            if isinstance(registry, ast.Dict):
                return self._registry(ctx, registry)
            spelled = ctx.qualname(func.value)
            if spelled is not None:
                return list(project.optimizer_classes(spelled))
            if isinstance(func.value, ast.Name) and names.binding_scope(func.value) is names.module_scope:
                return list(project.own.optimizers.get(func.value.id, ()))
            return []
        if not isinstance(func, ast.Name):
            return []
        owner = names.binding_scope(func)
        if owner is None:
            return []
        reaching = value_at(ctx, func)
        if reaching is not None:  # `optimizer_class = prodigyopt.Prodigy` just above the call: that one
            target = ctx.qualname(reaching)
            return [target] if target in OPTIMIZER_NAMES else []
        targets = owner.bindings.get(func.id, [])
        values = owner.values.get(func.id, [])
        if any(t is not None for t in targets) or not values or any(v is None for v in values):
            return []  # bound by an import, a parameter, a loop: not a plain `name = <class>`
        found: list[Optional[str]] = []
        for value in values:
            target = ctx.qualname(value)  # type: ignore[arg-type]
            found.append(target if target in OPTIMIZER_NAMES else None)
        return found if any(found) else []

    def _registry(self, ctx: AstContext, registry: ast.Dict) -> list[Optional[str]]:
        found: list[Optional[str]] = []
        for key, value in zip(registry.keys, registry.values):
            if key is None:
                return []  # `{**other}`
            target = ctx.qualname(value)
            if target not in OPTIMIZER_NAMES:
                return []  # a registry of other things too: which one runs is not known
            found.append(target)
        return found

    def _sharded_scaler(self, ctx: AstContext) -> bool:
        """FSDP's ShardedGradScaler steps this file's optimizers, now or after gpulint's own float16 fix."""
        if "fsdp" not in ctx.project.parallelism:
            return "ShardedGradScaler" in ctx.text
        return bool(ctx.project.scaler) or "ShardedGradScaler" in ctx.text or may_gain_grad_scaler(ctx)

    def _cuda_kernels(self, ctx: AstContext, optimizers: list[str]) -> bool:
        """Every torch the project supports has these optimizers' fused CUDA kernels."""
        return floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling,
                                  [floors.fused(o) for o in optimizers]) is None

    def _too_new(self, ctx: AstContext, optimizers: list[str]) -> Optional[floors.Unavailable]:
        """The fused kernels need a torch the project supports (on CUDA, and on CPU from 2.4), and one the code
        can run on (its torch ceiling is above them: it imports no module torch removed before the kernels arrived,
        like `torch._six` or `torchtext.legacy`, asserts no older torch, fills with no uint8 mask and reads no
        `loss.data[0]` of a loss it calls `.backward()` on, calls no `.next()` on a DataLoader's iterator)."""
        symbols = [floors.fused(o) for o in optimizers]
        if not _cuda_only(ctx):  # parameters that may sit on the CPU need its fused kernels too
            symbols += [floors.FUSED_CPU for o in optimizers if o != "Adagrad"]
        return floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling, symbols)


@dataclass(frozen=True)
class _Fallback:
    """How a file chooses between CUDA and the CPU (or MPS): the test as the file writes it, and the tests
    that are flags (empty where `torch.cuda.is_available()` alone chooses, which holds anywhere)."""
    spelled: str
    flags: tuple[ast.expr, ...] = ()


def _device_by_availability(ctx: AstContext) -> Optional[_Fallback]:
    """The test that puts the parameters on CUDA, when every other device the file names ("cpu", and "mps" or
    `torch.backends.mps`) is the fallback of a device chosen by it, in a script that shows CUDA: its parameters
    are off CUDA only where the test is false. The test is `torch.cuda.is_available()` (`torch.device("cuda" if
    torch.cuda.is_available() else "cpu")`, `"cuda" if ... else "mps" if ... else "cpu"`, or the `else:` /
    `elif` branches of `if torch.cuda.is_available():`), or one flag test (_flag_test) whose true branch is
    CUDA (`torch.device('cuda' if args.cuda else 'cpu')`), the same wherever the file falls back."""
    project = ctx.project
    if not (project.gpu and set(project.devices) <= {"mps"}
            and not project.devices_callers):
        return None
    spelled: Optional[str] = None
    flags: list[ast.expr] = []
    for node in ctx.nodes(ast.Constant, ast.Attribute):
        if isinstance(node, ast.Constant):
            if not (isinstance(node.value, str) and _OTHER_DEVICE_STRING.fullmatch(repr(node.value))) \
                    or isinstance(ctx.parent(node), ast.Compare):
                continue  # "cpu", "cpu:0", "mps" (a comparison, `device == "mps"`, chooses nothing)
        elif not (isinstance(node, ast.Attribute) and node.attr == "mps"
                  and ctx.qualname(node) in ("torch.backends.mps", "torch.mps")):
            continue
        test = _cuda_fallback_of(ctx, node)
        if test is None:
            return None
        if _availability(ctx, test):
            if flags:
                return None  # two tests: where the parameters live follows neither alone
        elif spelled is not None and not (flags and ast.dump(test) == ast.dump(flags[0])):
            return None
        else:
            flags.append(test)
        spelled = spelled or ctx.segment(test)
    return _Fallback(spelled, tuple(flags)) if spelled is not None else None


def _cuda_fallback_of(ctx: AstContext, node: ast.AST) -> Optional[ast.expr]:
    """The test whose false branch `node` lies in (within its function), else None: the `torch.cuda.is_available()`
    call of a conditional (`not` of it swapping the branches), or a flag test (_flag_test) whose true branch
    names a CUDA device (`"cuda" if args.cuda else "cpu"`, `"cpu" if not args.cuda else "cuda"`, where the test
    is the flag without its `not`)."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(ancestor, (ast.IfExp, ast.If)):
            test, negated = ancestor.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            if _availability(ctx, test):
                return test if _within(ancestor, ancestor.body if negated else ancestor.orelse, child) else None
            if _flag_test(ctx, ancestor.test) and _names_cuda(ctx, ancestor.body):
                return ancestor.test if _within(ancestor, ancestor.orelse, child) else None
            if negated and _flag_test(ctx, test) and _names_cuda(ctx, ancestor.orelse):
                return test if _within(ancestor, ancestor.body, child) else None
        child = ancestor
    return None


def _within(conditional: ast.AST, branch: "ast.expr | list[ast.stmt]", child: ast.AST) -> bool:
    """`child` (a child of the conditional) is the branch, or one of its statements."""
    return child is branch if isinstance(conditional, ast.IfExp) else any(child is s for s in branch)  # type: ignore


def _availability(ctx: AstContext, test: ast.expr) -> bool:
    return isinstance(test, ast.Call) and ctx.qualname(test.func) == "torch.cuda.is_available"


_CUDA_STRING = re.compile(r"cuda(?::\d+)?")


def _names_cuda(ctx: AstContext, branch: "ast.expr | list[ast.stmt]") -> bool:
    """The branch of a conditional is a CUDA device (`"cuda"`, `"cuda:0"`, `f"cuda:{args.gpu}"`, `torch.device`
    of one), or for an `if` statement holds one."""
    def cuda(expr: ast.AST) -> bool:
        if isinstance(expr, ast.Call) and ctx.qualname(expr.func) == "torch.device" and len(expr.args) == 1:
            expr = expr.args[0]
        if isinstance(expr, ast.JoinedStr):  # f"cuda:{args.gpu}"
            expr = expr.values[0] if expr.values else expr
            return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value.startswith("cuda:")
        return isinstance(expr, ast.Constant) and isinstance(expr.value, str) \
            and _CUDA_STRING.fullmatch(expr.value) is not None
    if isinstance(branch, list):
        return any(cuda(n) for statement in branch for n in walk_nodes(statement))
    return cuda(branch)


def _flag(ctx: AstContext, expr: ast.expr) -> bool:
    """A plain flag: a name or an attribute chain over one (`use_cuda`, `args.cuda`, `self.use_gpu`), not
    something of torch's."""
    chain = dotted(expr)
    return chain is not None and not (ctx.qualname(expr) or "").startswith("torch")


def _flag_test(ctx: AstContext, test: ast.expr) -> bool:
    """A test of flags: a flag, `not` one, a flag compared with literals (`args.device == "cuda"`,
    `args.gpu >= 0`), or `and`/`or` of such tests and `torch.cuda.is_available()`
    (`args.cuda and torch.cuda.is_available()`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _flag_test(ctx, test.operand)
    if isinstance(test, ast.Compare):
        return len(test.ops) == 1 and _flag(ctx, test.left) and _literals(test.comparators[0])
    if isinstance(test, ast.BoolOp):
        return all(_availability(ctx, v) or _flag_test(ctx, v) for v in test.values)
    return _flag(ctx, test)


def _literals(expr: ast.expr) -> bool:
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return all(isinstance(e, ast.Constant) for e in expr.elts)
    return isinstance(expr, ast.Constant)


def _lightning_device(ctx: AstContext, node: ast.Call) -> Optional[str]:
    """`fused=self.device.type == "cuda"` for an optimizer a LightningModule builds in its own
    `configure_optimizers`: Lightning moves the module to its device before calling it, so the test is true
    exactly where the parameters are on CUDA (boltz's Boltz1, whose trainer's accelerator comes from a config:
    on the CPU, torch before 2.4 has no fused kernel). None elsewhere."""
    function = next((a for a in ctx.ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None or function.name != "configure_optimizers" or not function.args.args:
        return None
    owner = ctx.parent(function)
    if not isinstance(owner, ast.ClassDef) or not any(ctx.qualname(b) in LIGHTNING_MODULES for b in owner.bases):
        return None
    this = function.args.args[0].arg
    if function.decorator_list or any(isinstance(n, ast.Name) and n.id == this and isinstance(n.ctx, ast.Store)
                                      for n in walk_nodes(function)):
        return None  # a static method, or `self` bound to something else
    return f'{this}.device.type == "cuda"'


def _built_on_device(ctx: AstContext, node: ast.Call) -> Evidence:
    """BUILT_ON_DEVICE: on a torch before 2.4 (floor or ceiling), every module whose parameters the optimizer
    holds is moved to its device before it is built (`_moved_when_built`), or Lightning moves it first."""
    if floors.unavailable(ctx.settings.torch_version, ctx.project.torch_ceiling, [floors.FUSED_CPU]) is None:
        return SHOWN  # torch 2.4 on: fused kernels for CPU parameters too
    if _lightning_device(ctx, node) is not None:
        return SHOWN
    modules = _optimized_modules(ctx, node)
    if not modules:
        return UNDECIDED  # tensors of unknown origin
    return all_of(*(_moved_when_built(ctx, node, m) for m in modules))


def _optimized_modules(ctx: AstContext, node: ast.Call) -> list[ast.expr]:
    """The modules whose `.parameters()` (or `named_parameters()`) the optimizer built at `node` holds, read
    through a name bound once; [] where its parameters are anything else or unknown."""
    name, _ = OPTIMIZER_PARAMS
    kwargs = ctx.kwargs(node)
    params = kwargs.get(name) if kwargs.passed(name) else next(
        (a for a in node.args if not isinstance(a, ast.Starred)), None)
    if isinstance(params, ast.Name):
        params = single_value(params, ctx.names)
    if params is None:
        return []
    return [n.func.value for n in walk_nodes(params) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in ("parameters", "named_parameters")]


def _inherited_fused(ctx: AstContext, node: ast.Call) -> Optional[str]:
    """What to pass as `fused` where every module the optimizer holds is an attribute of `self` that the
    `__init__` of the class's base moved (`_inherited_move`), all to one device: `self.device.type == "cuda"`
    for `.to(self.device)` of a `torch.device` (the CPU where a flag says so: before torch 2.4 fused=True
    raises there), True for `.cuda()`. None otherwise."""
    modules = _optimized_modules(ctx, node)
    function = ctx.enclosing_function(node)
    found = {_inherited_move(ctx, function, m) for m in modules} if function is not None else {None}
    if len(found) != 1:
        return None
    device = found.pop()
    if device is None:
        return None
    this = function.args.args[0].arg  # type: ignore[union-attr]
    return f'{this}.{device}.type == "cuda"' if device else "True"


def _moves_to_device(ctx: AstContext, call: ast.AST) -> bool:
    """`x.cuda(...)`, `x.to(device)` (not `.to(dtype)` nor `.to(memory_format=...)` alone)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr == "cuda":
        return True
    if call.func.attr != "to":
        return False
    if any(k.arg == "device" for k in call.keywords):
        return True
    if not call.args or isinstance(call.args[0], ast.Starred):
        return False
    return _device_like(ctx, call.args[0])


def _device_like(ctx: AstContext, first: ast.expr) -> bool:
    """`.to(first)` names a device, not a dtype: a string or an index, a `torch.device(...)` or other call, a name
    that is not a dtype, or a choice between such (`"cuda" if torch.cuda.is_available() else "cpu"`)."""
    if isinstance(first, ast.IfExp):
        return _device_like(ctx, first.body) and _device_like(ctx, first.orelse)
    spelled = ctx.qualname(first) or dotted(first) or ""
    if isinstance(first, ast.Constant):
        return isinstance(first.value, (str, int))  # "cuda", "cuda:0", 0
    return bool(spelled) and "dtype" not in spelled.rpartition(".")[2].lower() and not (
        spelled.startswith("torch.") and spelled.rpartition(".")[2] in DTYPE_NAMES) or isinstance(first, ast.Call)


def _moved_when_built(ctx: AstContext, node: ast.Call, module: ast.expr) -> Evidence:
    """The module (`model`, `self.model`, `model.encoder`) is on its device when `node` builds the optimizer:
    moved in the receiver itself (`model.cuda().parameters()`), or moved last, before `node` in the same
    function (module level: the whole notebook before the cell), by `.cuda()`/`.to(device)` on it or on what
    it is an attribute of, an assignment of a moved value to it (`model = Net().cuda()`), or
    `accelerator.prepare(..., model, ...)`; a binding of anything else to it between undoes that, and a
    wrapper over it (`model = nn.DataParallel(model)`) keeps it. Refuted where it is moved there only after
    `node`, undecided where never."""
    if any(_moves_to_device(ctx, n) for n in walk_nodes(module)):
        return SHOWN
    spelled = dotted(module)
    if spelled is None:
        return UNDECIDED
    parts = spelled.split(".")
    prefixes = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    function = ctx.enclosing_function(node)
    at = ctx.order(node)
    assert at is not None
    events = _device_events(ctx, prefixes)
    here = [(order, moved) for order, moved, where in events if where is function]
    before = [moved for order, moved in here if order < at]
    if before:
        return SHOWN if before[-1] else UNDECIDED
    if any(moved for order, moved in here if order > at):
        return REFUTED
    # a method over `self.network` that `__init__` moved (`self.network = network.cuda()`), bound nowhere else
    owner = ctx.parent(function) if function is not None else None
    this = function.args.args[0].arg if function is not None and function.args.args else None
    if not (isinstance(owner, ast.ClassDef) and function is not None and function.name != "__init__"
            and parts[0] == this and len(parts) > 1):
        return UNDECIDED
    if _inherited_move(ctx, function, module) is not None:
        return SHOWN  # the base class's __init__ moved it, and this class binds it nowhere
    init = next((f for f in owner.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.name == "__init__" and f.args.args and f.args.args[0].arg == this), None)
    if init is None or any(not moved and where is not None and where is not init and ctx.parent(where) is owner
                           for _, moved, where in events):
        return UNDECIDED
    moves = [moved for _, moved, where in sorted(events, key=lambda e: e[0]) if where is init]
    return SHOWN if moves and moves[-1] else UNDECIDED


def _inherited_move(ctx: AstContext, function: ast.AST, module: ast.expr) -> Optional[str]:
    """The device attribute ("" for `.cuda()`) that the `__init__` of the one base of the method's module-level
    class moved `self.<attr>` (the module, or what it is an attribute of) to (FileFacts.init_moves: of a base in
    this file, or through ProjectView.inherited_moves of one a `from` import binds), where the class runs that
    `__init__` first (none of its own, or one that calls it before anything else) and binds neither attribute
    nor overrides the method that returned the device, and no class of the file derives from it; None otherwise
    (blind25: iTransformer's Exp_Long_Term_Forecast builds Adam over `self.model` in `_select_optimizer`, and
    Exp_Basic's `__init__` ran `self.model = self._build_model().to(self.device)`)."""
    if not isinstance(function, ast.FunctionDef) or function.decorator_list or not function.args.args \
            or function.name == "__init__":
        return None
    owner = ctx.parent(function)
    this = function.args.args[0].arg
    parts = (dotted(module) or "").split(".")
    if not (isinstance(owner, ast.ClassDef) and isinstance(ctx.parent(owner), ast.Module) and len(parts) > 1
            and parts[0] == this and len(owner.bases) == 1 and isinstance(owner.bases[0], ast.Name)
            and not owner.keywords):
        return None
    base = owner.bases[0].id
    own = ctx.project.own
    classes = [c for c in ctx.tree.body if isinstance(c, ast.ClassDef)]
    if any(isinstance(b, ast.Name) and b.id == owner.name for c in classes for b in c.bases):
        return None  # a subclass here may bind the attribute again
    moves = own.init_moves.get(base, ()) if any(c.name == base for c in classes) \
        else ctx.project.inherited_moves.get(owner.name, ())
    entry = next((m for m in moves if m.split(":", 1)[0] == parts[1]), None)
    if entry is None:
        return None
    _, device, method = entry.split(":")
    if method and any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == method
                      for f in owner.body):
        return None  # the device comes from this class's own override
    for node in walk_nodes(owner):
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) \
                and node.attr in (parts[1], device) and isinstance(node.value, ast.Name):
            return None  # bound here too
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "vars"):
            return None
    init = next((f for f in owner.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.name == "__init__"), None)
    if init is not None and not _calls_base_init_first(init, owner, base):
        return None
    return device


def _calls_base_init_first(init: ast.AST, owner: ast.ClassDef, base: str) -> bool:
    """The class's own `__init__` first (after a docstring) calls its base's: `super().__init__(...)`,
    `super(Owner, self).__init__(...)` or `Base.__init__(self, ...)`."""
    assert isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef))
    if not init.args.args:
        return False
    this = init.args.args[0].arg
    body = init.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
        return False
    func = body[0].value.func
    if not (isinstance(func, ast.Attribute) and func.attr == "__init__"):
        return False
    receiver = func.value
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
        args = receiver.args
        return not args or len(args) == 2 and isinstance(args[0], ast.Name) and args[0].id == owner.name \
            and isinstance(args[1], ast.Name) and args[1].id == this
    call = body[0].value
    return isinstance(receiver, ast.Name) and receiver.id == base and bool(call.args) \
        and isinstance(call.args[0], ast.Name) and call.args[0].id == this


def _device_events(ctx: AstContext, prefixes: set[str]) -> list[tuple[int, bool, Optional[ast.AST]]]:
    """Where a module spelled by one of `prefixes` is moved to a device (True) or bound to something else
    (False), in source order, with the function each happens in (None: module level)."""
    events: list[tuple[int, bool, Optional[ast.AST]]] = []
    for candidate in ctx.nodes(ast.Call, ast.Assign, ast.AnnAssign):
        if isinstance(candidate, ast.Call):
            func = candidate.func
            moved = isinstance(func, ast.Attribute) and (
                _moves_to_device(ctx, candidate) and dotted(func.value) in prefixes
                or (func.attr in ("prepare", "prepare_model")
                    or func.attr in ("setup", "setup_module") and _fabric(ctx, func.value))
                and any(dotted(a) in prefixes for a in candidate.args))
            if not moved:
                continue
            event = True
        else:
            assert isinstance(candidate, (ast.Assign, ast.AnnAssign))
            targets = candidate.targets if isinstance(candidate, ast.Assign) else [candidate.target]
            if candidate.value is None or not any(dotted(t) in prefixes for t in targets):
                continue
            inside = walk_nodes(candidate.value)
            if any(_moves_to_device(ctx, n) for n in inside) or _built_under_device(ctx, candidate):
                event = True
            elif any(dotted(n) in prefixes for n in inside if isinstance(n, (ast.Name, ast.Attribute))):
                continue  # `model = nn.DataParallel(model)`: the same parameters, where they were
            else:
                event = False
        order = ctx.order(candidate)
        assert order is not None
        events.append((order, event, ctx.enclosing_function(candidate)))
    return events


def _fabric(ctx: AstContext, receiver: ast.expr) -> bool:
    """`receiver` is bound, once, to Lightning's `Fabric(...)`: its `setup`/`setup_module` move the module."""
    value = single_value(receiver, ctx.names) if isinstance(receiver, ast.Name) else None
    if not isinstance(value, ast.Call):
        return False
    spelled = ctx.qualname(value.func) or dotted(value.func) or ""
    return spelled.rpartition(".")[2] == "Fabric"


def _built_under_device(ctx: AstContext, statement: ast.AST) -> bool:
    """The module is built inside `with fabric.device:` or `with torch.device("cuda"):`: its parameters are
    created on that device (a device context manager), so a value bound there is already moved."""
    for ancestor in ctx.ancestors(statement):
        if not isinstance(ancestor, (ast.With, ast.AsyncWith)):
            continue
        for item in ancestor.items:
            context = item.context_expr
            if isinstance(context, ast.Attribute) and context.attr == "device" and _fabric(ctx, context.value):
                return True
            if isinstance(context, ast.Call) and ctx.qualname(context.func) == "torch.device" and context.args \
                    and isinstance(context.args[0], ast.Constant) and isinstance(context.args[0].value, str) \
                    and context.args[0].value.split(":")[0] == "cuda":
                return True
    return False


def _fused_where(ctx: AstContext, fallback: _Fallback, node: ast.Call) -> Optional[str]:
    """What to pass as `fused` to the optimizer built at `node` so that it is true exactly where the parameters
    are on CUDA: the availability test anywhere; a flag test only where it can be read at the optimizer (same
    function, or both at module level; no name or attribute it reads bound between), as the file spells it,
    inside `bool(...)` unless its value is a bool (_bool_valued). None where it cannot be read there."""
    if not fallback.flags:
        return fallback.spelled
    if "\n" in fallback.spelled:
        return None
    for test in fallback.flags:
        if not _readable_at(ctx, test, node):
            return None
    test = fallback.flags[0]
    return fallback.spelled if _bool_valued(ctx, test, frozenset()) else f"bool({fallback.spelled})"


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _readable_at(ctx: AstContext, test: ast.expr, node: ast.Call) -> bool:
    """The flag test reads, at the optimizer, what it read where it chose the device: both sit in one function
    (or both at module level, outside comprehensions), and nothing in that scope between them binds a name the
    test reads or stores to an attribute chain it reads or one below it (`args = ...`, `args.cuda = ...`,
    `import args`), or may set attributes of one by name (`setattr(args, ...)`, `vars(args)`, `args.__dict__`)."""
    scope = ctx.enclosing_function(node)
    if ctx.enclosing_function(test) is not scope:
        return False
    for around in ctx.ancestors(test):
        if around is scope:
            break
        if isinstance(around, _COMPREHENSIONS + (ast.Lambda, ast.ClassDef)):
            return False  # a name of its own scope, unbound at the optimizer
    chains = {c for c in (dotted(n) for n in walk_nodes(test) if isinstance(n, (ast.Name, ast.Attribute))) if c}
    roots = {c.split(".", 1)[0] for c in chains}

    def rooted(expr: Optional[ast.expr]) -> bool:
        chain = dotted(expr) if expr is not None else None
        return chain is not None and chain.split(".", 1)[0] in roots

    first, last = sorted((ctx.order(test) or 0, ctx.order(node) or 0))
    for other in ctx.nodes(ast.Name, ast.Attribute, ast.Call, ast.alias):
        if not first < (ctx.order(other) or 0) < last or ctx.enclosing_function(other) is not scope:
            continue
        if isinstance(other, ast.alias):
            if (other.asname or other.name.split(".", 1)[0]) in roots:
                return False
        elif isinstance(other, ast.Call):
            if isinstance(other.func, ast.Name) and other.func.id in ("setattr", "vars") and other.args \
                    and rooted(other.args[0]):
                return False
        elif isinstance(other, ast.Attribute) and other.attr == "__dict__" and rooted(other.value):
            return False
        elif isinstance(other, (ast.Name, ast.Attribute)) and not isinstance(other.ctx, ast.Load):
            stored = dotted(other)
            if stored is not None and any(c == stored or c.startswith(stored + ".") for c in chains):
                return False
    return True


def _bool_valued(ctx: AstContext, test: ast.expr, seen: frozenset[str]) -> bool:
    """The test's value is a bool: a comparison, `not`, `torch.cuda.is_available()`, `and`/`or` of bools, a name
    bound only to such values in its scope, or an argparse `store_true`/`store_false` option (FileFacts.bool_flags)
    every store of the file to that attribute chain gives such a value (`args.cuda` from `--cuda`). `seen`: the
    names and chains being read (a store of a chain from itself, `args.cuda = args.cuda and ...`, keeps a bool)."""
    if isinstance(test, ast.Compare) or isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.Constant):
        return isinstance(test.value, bool)
    if _availability(ctx, test):
        return True
    if isinstance(test, ast.BoolOp):
        return all(_bool_valued(ctx, v, seen) for v in test.values)
    chain = dotted(test)
    if chain is None:
        return False
    if chain in seen:
        return True
    seen = seen | {chain}
    if isinstance(test, ast.Name):
        owner = ctx.names.binding_scope(test)
        if owner is None:
            return False
        targets, values = owner.bindings.get(test.id, []), owner.values.get(test.id, [])
        return bool(values) and not any(t is not None for t in targets) and all(
            v is not None and _bool_valued(ctx, v, seen) for v in values)
    assert isinstance(test, ast.Attribute)
    if test.attr not in ctx.project.own.bool_flags:
        return False
    root: ast.expr = test
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and (owner := ctx.names.binding_scope(root)) is not None \
            and any(v is not None and not _parsed(v) for v in owner.values.get(root.id, [])):
        return False  # `opt = Config()`: not the parsed options
    for other in ctx.nodes(ast.Attribute):
        assert isinstance(other, ast.Attribute)
        if isinstance(other.ctx, ast.Load) or dotted(other) != chain:
            continue
        statement = ctx.parent(other)
        if not (isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None
                and (isinstance(statement, ast.AnnAssign) or statement.targets == [other])
                and _bool_valued(ctx, statement.value, seen)):
            return False
    for call in ctx.nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Name) and call.func.id == "setattr" and len(call.args) == 3
                and dotted(call.args[0]) == chain.rsplit(".", 1)[0]):
            continue
        named = call.args[1]
        if not (isinstance(named, ast.Constant) and named.value != test.attr) \
                and not _bool_valued(ctx, call.args[2], seen):
            return False  # `setattr(args, "cuda", 1)`
    return True


def _parsed(value: ast.expr) -> bool:
    """`parser.parse_args()`: the options argparse parses."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "parse_args"


def _cuda_only(ctx: AstContext) -> bool:
    """The script shows CUDA (here or in a caller) and never names the CPU (no "cpu" string anywhere in it, so
    no `"cuda" if available else "cpu"` fallback) nor another device: its parameters are on the GPU, and the
    CPU fused kernels (torch 2.4) are not needed."""
    project = ctx.project
    return project.gpu and not project.own.cpu_pinned and not (set(project.devices) - {"framework"}) \
        and not ctx.analysis(_names_cpu) and not ctx.analysis(_cuda_by_default_only)


_CUDA_STRING = re.compile(r"cuda(?::\d+)?")


def _cuda_by_default_only(ctx: AstContext) -> bool:
    """Every CUDA device the file names is a parameter's default (`device: torch.device =
    torch.device('cuda')`, `device="cuda"`): its callers choose the device, and may pass the CPU or MPS
    (blind13: nnUNet's trainer variants, whose run_training.py offers `-device cpu/mps/cuda`)."""
    if "cuda" not in ctx.text:
        return False
    defaults: list[ast.AST] = []
    for arguments in ctx.nodes(ast.arguments):
        assert isinstance(arguments, ast.arguments)
        defaults += [d for d in (*arguments.defaults, *arguments.kw_defaults) if d is not None]
    inside = {id(n) for d in defaults for n in walk_nodes(d)}
    named = [n for n in ctx.nodes(ast.Constant) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and _CUDA_STRING.fullmatch(n.value)]
    uses = [n for n in ctx.nodes(ast.Attribute) if isinstance(n, ast.Attribute)
            and n.attr in ("cuda", "is_available") and not isinstance(ctx.parent(n), ast.Attribute)]
    return bool(named) and not uses and all(id(n) in inside for n in named)


def _framework_owned(ctx: AstContext) -> bool:
    """A framework that owns the loop (Accelerate, Lightning, DeepSpeed) may scale the loss under fp16: the
    file imports one at module level (analysis/training.py's test, on `ast`)."""
    if not any(name in ctx.text for name in FRAMEWORKS):
        return False
    return imports_framework(ctx)


_CPU_STRING = re.compile(r"""["']cpu(?::\d+)?["']""")
_OTHER_DEVICE_STRING = re.compile(r"""["'](?:cpu(?::\d+)?|mps)["']""")


def _names_cpu(ctx: AstContext) -> bool:
    """Once per file: a file of many optimizers would search its text once for each."""
    return _CPU_STRING.search(ctx.text) is not None


def _names_sparse(ctx: AstContext) -> bool:
    return _SPARSE.search(ctx.text) is not None


def _fused_device(project: ProjectView) -> Evidence:
    """Refuted on a TPU; undecided where XPU is the only device named, and where no file of the project shows
    an accelerator (ProjectView.accelerated_project: a CPU-only project, blind13's SimGNN, blind25's CapsGNN,
    where a fused CPU step saves nothing measurable); shown otherwise (CUDA and MPS have fused kernels on the
    torch versions FUSED_EXISTS admits)."""
    if project.own.xla:
        return REFUTED
    if "xpu" in project.devices and not project.gpu:
        return UNDECIDED
    if project.gpu or project.imported_cuda or project.devices or project.accelerated_project \
            or own_accelerated(project.own):
        return SHOWN
    return UNDECIDED


# what reading an optimizer's learning rate or clearing its gradients reads: no step
_UNSTEPPED_READS = frozenset({"param_groups", "zero_grad", "defaults"})


def _rebound_unstepped(ctx: AstContext, node: ast.Call) -> bool:
    """`optimizer = AdamW(...)` at module level, only its `.param_groups` read before `optimizer = ...` again,
    and no function reading the global name (see STEPPED)."""
    statement = ctx.parent(node)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and ctx.parent(statement) is ctx.tree):
        return False
    name = statement.targets[0].id
    module = ctx.names.module_scope
    for use in ctx.named(name):
        if isinstance(use.ctx, ast.Load) and ctx.names.binding_scope(use) is module and \
                any(isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for a in ctx.ancestors(use)):
            return False  # a function may step the global optimizer whenever it is called
    for later in following(ctx, statement):
        if isinstance(later, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in later.targets) \
                and not any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                            for n in walk_nodes(later.value)):
            return True  # bound again, never stepped
        for read in walk_nodes(later):
            if isinstance(read, ast.Name) and read.id == name and isinstance(read.ctx, ast.Load) \
                    and ctx.names.binding_scope(read) is module:
                parent = ctx.parent(read)
                if not (isinstance(parent, ast.Attribute) and parent.attr in _UNSTEPPED_READS):
                    return False
    return False


# what an optimizer answers without stepping or handing itself on: its state saved or loaded, its rate read or set
_NEVER_STEP = _UNSTEPPED_READS | frozenset({"state_dict", "load_state_dict", "state", "add_param_group"})
# calls that read an object without keeping it (`isinstance(opt, ...)`, `print(opt)`)
_READING_CALLS = frozenset({"isinstance", "print", "type", "id", "repr", "str"})
# builtins that reach a function's locals or an object's attributes by name
_BY_NAME = frozenset({"locals", "vars", "eval", "exec", "getattr", "setattr", "globals"})


def _never_stepped(ctx: AstContext, node: ast.Call) -> bool:
    """The optimizer is bound to a local name of a function (`optim_g = AdamW(...)`) or to `self.<attr>` in a
    method, and every read of that binding only reads or loads its state or rate (`_NEVER_STEP`: `state_dict()`,
    `param_groups`, `zero_grad()`), never `.step`, never hands it on (an argument, a return, a stored value, a
    container, another name): a checkpoint-conversion script that saves an optimizer's empty state (see STEPPED).
    For an attribute, the reads are those of every method the instance may run: the class's own, those of the
    classes of the file that derive from it, and those its bases (classes of this file alone, one each) define
    and it does not override (nor reach through `super()`); refused where any of them hands the instance on,
    reads attributes by name (`getattr`), or the file spells that attribute on anything else
    (`trainer.optimizer.step()`)."""
    statement = ctx.parent(node)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is node):
        return False
    target = statement.targets[0]
    function = ctx.enclosing_function(node)
    if function is None:
        return False
    if isinstance(target, ast.Name):
        scope = ctx.names.binding_scope(target)
        if scope is None or scope.node is not function or _reaches_by_name(function):
            return False
        return all(isinstance(use.ctx, (ast.Store, ast.Del)) or _only_read(ctx, use)
                   for use in ctx.bound_uses(target.id, scope))
    me = _self_name(function)
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me):
        return False
    methods = _instance_methods(ctx, ctx.parent(function))
    if methods is None:
        return False
    seen = {id(m) for m in methods}
    attr = target.attr
    for method in methods:
        assert isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        positional = method.args.posonlyargs + method.args.args
        instance = positional[0].arg if positional else None  # (a property's too; a static method's is read alike)
        if _reaches_by_name(method):
            return False
        for use in all_nodes(method):
            if instance is not None and isinstance(use, ast.Name) and use.id == instance \
                    and isinstance(use.ctx, ast.Load):
                parent = ctx.parent(use)
                if not (isinstance(parent, ast.Attribute) and parent.value is use and parent.attr != "__dict__"
                        or isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                        and parent.func.id in ("super", *_READING_CALLS)):
                    return False  # the instance handed on: whoever gets it may step its optimizer
            elif isinstance(use, ast.Attribute) and use.attr == attr and isinstance(use.ctx, ast.Load) \
                    and not _only_read(ctx, use):
                return False
    for use in ctx.nodes(ast.Attribute):
        assert isinstance(use, ast.Attribute)
        if use.attr != attr or isinstance(use.ctx, ast.Store):
            continue
        around = ctx.enclosing_function(use)
        if around is not None and id(around) in seen:
            continue
        owner = ctx.parent(around) if around is not None else None
        if not (isinstance(owner, ast.ClassDef) and isinstance(use.value, ast.Name)
                and use.value.id == _self_name(around)):
            return False  # `trainer.optimizer.step()`: the attribute read on an instance from outside
    return True


def _compiled_steps(ctx: AstContext, node: ast.Call) -> Evidence:
    """REFUTED where every `.step()` of the optimizer `self.<attr> = Optimizer(...)` runs in a method of its
    class that the class compiles (decorated `@torch.compile`, or `self.m = torch.compile(self.m, ...)`), or in
    one only such methods call; UNDECIDED where a compile that covers them sits under a test; SHOWN otherwise
    (see WORK_TO_FUSE)."""
    statement = ctx.parent(node)
    function = ctx.enclosing_function(node)
    owner = ctx.parent(function) if function is not None else None
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is node
            and isinstance(owner, ast.ClassDef)):
        return SHOWN
    target = statement.targets[0]
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == _self_name(function)):
        return SHOWN
    methods: dict[str, ast.AST] = {}
    for member in owner.body:
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if member.name in methods:
                return SHOWN
            methods[member.name] = member
    compiled: dict[str, Evidence] = {}  # method -> REFUTED (always compiled) / UNDECIDED (under a test)
    for name, method in methods.items():
        assert isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        if any(ctx.qualname(d.func if isinstance(d, ast.Call) else d) == "torch.compile"
               for d in method.decorator_list):
            compiled[name] = REFUTED
        me = _self_name(method)
        for assign in all_nodes(method):
            if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1
                    and isinstance(assign.value, ast.Call) and ctx.qualname(assign.value.func) == "torch.compile"
                    and assign.value.args):
                continue
            rebound, source = assign.targets[0], assign.value.args[0]
            if isinstance(rebound, ast.Attribute) and isinstance(source, ast.Attribute) \
                    and rebound.attr == source.attr and rebound.attr in methods \
                    and all(isinstance(x.value, ast.Name) and x.value.id == me for x in (rebound, source)):
                tested = any(isinstance(a, (ast.If, ast.IfExp, ast.Try, ast.For, ast.While))
                             for a in ctx.ancestors(assign) if ctx.within(a, method))
                if compiled.get(rebound.attr) is not REFUTED:
                    compiled[rebound.attr] = UNDECIDED if tested else REFUTED
    if not compiled:
        return SHOWN
    # a method every `self.<m>` read of which is a call from compiled methods is compiled with them
    grown = True
    while grown:
        grown = False
        for name in methods:
            if name in compiled:
                continue
            callers: list[Evidence] = []
            for use in ctx.nodes(ast.Attribute):
                assert isinstance(use, ast.Attribute)
                if use.attr != name or isinstance(use.ctx, ast.Store):
                    continue
                around = ctx.enclosing_function(use)
                call = ctx.parent(use)
                if around is None or ctx.parent(around) is not owner or not isinstance(use.value, ast.Name) \
                        or use.value.id != _self_name(around) or not (isinstance(call, ast.Call) and call.func is use):
                    callers = []
                    break
                assert isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef))
                state = compiled.get(around.name)
                if state is None:
                    callers = []
                    break
                callers.append(state)
            if callers:
                compiled[name] = REFUTED if all(c is REFUTED for c in callers) else UNDECIDED
                grown = True
    derived = {owner.name}  # the classes of the file that derive from it, whose `self.<attr>` is the same
    grown = True
    while grown:
        grown = False
        for cls in ctx.tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name not in derived \
                    and any(isinstance(b, ast.Name) and b.id in derived for b in cls.bases):
                derived.add(cls.name)
                grown = True
    steps: list[Evidence] = []
    for use in ctx.nodes(ast.Attribute):
        assert isinstance(use, ast.Attribute)
        if use.attr != target.attr or isinstance(use.ctx, ast.Store):
            continue
        step = ctx.parent(use)
        if not (isinstance(step, ast.Attribute) and step.value is use and step.attr == "step"):
            continue
        around = ctx.enclosing_function(use)
        holder = ctx.parent(around) if around is not None else None
        if isinstance(holder, ast.ClassDef) and holder is not owner and holder.name not in derived \
                and isinstance(use.value, ast.Name) and use.value.id == _self_name(around):
            continue  # another class's own attribute of that name
        if holder is not owner:
            return SHOWN  # stepped from outside the class: whether that runs compiled is not read
        assert isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef))
        state = compiled.get(around.name)
        if state is None:
            return SHOWN
        steps.append(state)
    if not steps:
        return SHOWN
    return REFUTED if all(s is REFUTED for s in steps) else UNDECIDED


def _only_read(ctx: AstContext, use: ast.expr) -> bool:
    """The optimizer read at `use` is neither stepped nor handed on: `use.state_dict()`, `use.param_groups`."""
    parent = ctx.parent(use)
    if isinstance(parent, ast.Attribute) and parent.value is use:
        return parent.attr in _NEVER_STEP
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in _READING_CALLS \
        and use in parent.args


def _reaches_by_name(function: ast.AST) -> bool:
    """The function calls `locals()`, `getattr(...)` or alike: what it reads is not spelled."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _BY_NAME
               for n in all_nodes(function))


def _instance_methods(ctx: AstContext, owner: Optional[ast.AST]) -> Optional[list[ast.AST]]:
    """Every method an instance of `owner`'s class, or of a class of this file derived from it, may run: their
    own, and what their bases define and they do not override (nor call through `super()` or the base's name).
    None where a base is not a class of this file (`nn.Module`, a library's Trainer, two bases) or a name is
    bound to two classes."""
    if not (isinstance(owner, ast.ClassDef) and owner in ctx.tree.body):
        return None
    classes: dict[str, ast.ClassDef] = {}
    for statement in ctx.tree.body:
        if isinstance(statement, ast.ClassDef):
            if statement.name in classes:
                return None
            classes[statement.name] = statement
    chain = [owner]
    while True:
        bases = [b for b in chain[-1].bases if not (isinstance(b, ast.Name) and b.id == "object")]
        if chain[-1].keywords or len(bases) > 1:
            return None
        if not bases:
            break
        base = bases[0]
        if not isinstance(base, ast.Name) or base.id not in classes or classes[base.id] in chain:
            return None
        chain.append(classes[base.id])
    family = {owner.name}
    grown = True
    while grown:
        grown = False
        for cls in classes.values():
            if cls.name not in family and any(isinstance(b, ast.Name) and b.id in family for b in cls.bases):
                family.add(cls.name)
                grown = True
    members = [c for c in classes.values() if c.name in family]
    reached = {n.func.attr for c in [*members, *chain] for n in all_nodes(c)
               if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and (isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
                    and n.func.value.func.id == "super"
                    or isinstance(n.func.value, ast.Name) and n.func.value.id in {c.name for c in chain})}
    found: list[ast.AST] = []
    defined: set[str] = set()
    for cls in [*chain, *(m for m in members if m is not owner)]:
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if cls in chain and cls is not owner and method.name in defined and method.name not in reached:
                continue  # overridden below it, and never reached through super()
            found.append(method)
        if cls in chain:
            defined |= {m.name for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return found


def _state_loaded_at_once(ctx: AstContext, node: ast.Call) -> bool:
    """`opt = AdamW(...)` whose next use, in the same block, is `opt.load_state_dict(...)` (the exercise
    notebook of LLMs-from-scratch, blind9): the saved param groups, and their `fused`, replace the ones built.
    So too under `if "optimizer" in ckpt:` where `ckpt` always holds a loaded file there (learning-tsp's
    finetune.py, blind25): the branch only asks whether the checkpoint carries the state, and a fresh run
    with the flag never happens; an empty `{}` left by an option (`if args.resume: ckpt = load(...)`) keeps it."""
    statement = ctx.parent(node)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target = dotted(statement.targets[0])
    if target is None:
        return False
    def mentions(statement: ast.stmt) -> bool:
        return any(dotted(n) == target for n in walk_nodes(statement) if isinstance(n, (ast.Name, ast.Attribute)))

    for later in following(ctx, statement):
        if not mentions(later):
            continue
        if isinstance(later, ast.If) and _asks_loaded_key(ctx, later.test):
            later = next(s for s in later.body if mentions(s)) if any(map(mentions, later.body)) else later
        call = later.value if isinstance(later, ast.Expr) else None
        return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr == "load_state_dict" and dotted(call.func.value) == target
    return False


def _asks_loaded_key(ctx: AstContext, test: ast.expr) -> bool:
    """`"optimizer" in ckpt` where `ckpt` holds, where it is read, what a load call returned (`torch.load(...)`,
    `load_checkpoint(...)`): the branch is taken whenever the saved file carries that key."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)
            and isinstance(test.comparators[0], ast.Name)):
        return False
    value = value_at(ctx, test.comparators[0])
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    last = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
    return "load" in last.lower()


def _step_matters(ctx: AstContext, node: ast.Call, held: Optional[Held]) -> Evidence:
    """Refuted next to a simulator or generation on every step (analysis/generation.py) and for an optimizer
    an adaptive-rate wrapper steps (apex LARC, torchlars LARS: its own loop over parameters stays); undecided
    where a whole network is frozen and only a small part trains (project/facts.py `_freezes_modules`): a
    fused step over a few tensors saves nothing measurable."""
    project = ctx.project
    wrapped = _wrapped_by_rate_loop(ctx, node)
    if project.rl or ctx.analysis(generation_bound) or wrapped == _ALWAYS:
        return REFUTED
    if wrapped == _SOMETIMES:
        return UNDECIDED  # `if args.lars: optimizer = LARC(optimizer)`: the plain optimizer runs otherwise
    if project.own.freezes_modules or project.freezes_importees or _head_only(ctx, held):
        return UNDECIDED
    return SHOWN


def _steps_off_environment(ctx: AstContext, node: ast.Call) -> Evidence:
    """OFF_ENVIRONMENT for the optimizer built at `node`, asked of its steps: refuted when it is bound to a
    name (or a `self.` attribute) that the file steps (`opt.step()`, `scaler.step(opt)`: the same binding, or
    the same attribute in the same class) and never hands on (no call but a class's takes it, no return, no
    other name bound to it), and every such step waits on an environment (analysis/reach.py
    `waits_on_environment`). An optimizer stepped elsewhere, or nowhere in view, is shown."""
    statement = ctx.parent(node)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is node):
        return SHOWN
    target = statement.targets[0]
    if isinstance(target, ast.Name):
        uses: list[ast.expr] = [n for n in ctx.bound_uses(target.id, ctx.names.binding_scope(target))
                                if n is not target]
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        owner = next((a for a in ctx.ancestors(statement) if isinstance(a, ast.ClassDef)), None)
        if owner is None:
            return SHOWN
        uses = [n for n in ctx.nodes(ast.Attribute) if isinstance(n, ast.Attribute) and n.attr == target.attr
                and isinstance(n.value, ast.Name) and n.value.id == "self" and n is not target
                and next((a for a in ctx.ancestors(n) if isinstance(a, ast.ClassDef)), None) is owner]
    else:
        return SHOWN
    steps: list[ast.Call] = []
    for use in uses:
        parent = ctx.parent(use)
        if isinstance(parent, ast.Attribute) and parent.value is use:
            call = ctx.parent(parent)
            if parent.attr == "step" and isinstance(call, ast.Call) and call.func is parent:
                steps.append(call)
            continue  # `opt.zero_grad()`, `opt.param_groups`: read, not handed on
        if isinstance(parent, ast.Call) and use in parent.args:
            func = parent.func
            if isinstance(func, ast.Attribute) and func.attr == "step" and len(parent.args) == 1:
                steps.append(parent)  # `scaler.step(opt)`
                continue
            callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if callee[:1].isupper():
                continue  # `StepLR(opt, ...)`: a scheduler reads it
            return SHOWN  # `train_one_epoch(model, opt)`: stepped where gpulint does not look
        if isinstance(parent, (ast.Return, ast.Assign, ast.keyword, ast.Tuple, ast.List, ast.Dict, ast.Call)) \
                and not (isinstance(parent, ast.Assign) and use in parent.targets):
            return SHOWN  # returned, stored, handed on by keyword
    return REFUTED if steps and all(waits_on_environment(ctx, step) for step in steps) else SHOWN


# calls that hand back the module they are given (moved, cast, wrapped for data parallelism)
_SAME_MODULE_METHODS = frozenset({"cuda", "to", "float", "double", "half", "bfloat16", "train", "cpu"})
_SAME_MODULE_WRAPPERS = frozenset({"DistributedDataParallel", "DataParallel", "convert_sync_batchnorm"})


@dataclass(frozen=True)
class Held:
    """What the optimizer's parameters belong to: the project classes one holder is bound to, and the most
    tensors any torch.nn module written inline for it holds (None: no such binding)."""

    classes: frozenset[str] = frozenset()
    inline: Optional[int] = None

    def __or__(self, other: "Held") -> "Held":
        inline = max((n for n in (self.inline, other.inline) if n is not None), default=None)
        return Held(self.classes | other.classes, inline)

    def __bool__(self) -> bool:
        return bool(self.classes) or self.inline is not None


def _held_classes(ctx: AstContext, node: ast.Call) -> Optional[Held]:
    """What holds the optimizer's parameters, or None when not known.

    The parameters are those of one name (`head.parameters()`, also under `filter(...)` or `list(...)`) that
    the enclosing function (or the module) binds only to instances of project classes, possibly moved or
    wrapped (`.cuda()`, `DistributedDataParallel(head)`, `convert_sync_batchnorm(head)`), or to such a move of
    an attribute of `self` (`model = self.model.cuda()`); or those of that attribute itself
    (`self.model.parameters()`), which the methods of the enclosing class bind only to such instances or to
    torch.nn modules written inline; or those of an attribute of such a name (`model.fc.parameters()`), which
    the methods of each class of this file the name is bound to bind alike."""
    name, _ = OPTIMIZER_PARAMS
    kwargs = ctx.kwargs(node)
    params = kwargs.get(name) if kwargs.passed(name) else next(
        (a for a in node.args if not isinstance(a, ast.Starred)), None)
    while isinstance(params, ast.Call) and isinstance(params.func, ast.Name) and params.func.id in ("filter", "list") \
            and params.args:
        params = params.args[-1]
    if not (isinstance(params, ast.Call) and isinstance(params.func, ast.Attribute)
            and params.func.attr == "parameters"):
        return None
    function = ctx.enclosing_function(node)
    held = params.func.value
    if isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name) and held.value.id != _self_name(function):
        return _part_of_name(ctx, function, held)
    if isinstance(held, ast.Attribute):
        return _attribute_classes(ctx, function, held)
    if not isinstance(held, ast.Name):
        return None
    if held.id == _self_name(function):
        return _own_class(ctx, function)
    return _name_classes(ctx, function, held.id)


def _own_class(ctx: AstContext, function: Optional[ast.AST]) -> Optional[Held]:
    """`self.parameters()` in a method of a top-level class of the file that no class of the file subclasses (a
    model that builds its own optimizer: RecSys_PyTorch's MF and LightGCN): that class's."""
    owner = ctx.parent(function) if function is not None else None
    if not (isinstance(owner, ast.ClassDef) and owner in ctx.tree.body):
        return None
    for node in ctx.nodes(ast.ClassDef):
        assert isinstance(node, ast.ClassDef)
        if any(isinstance(base, ast.Name) and base.id == owner.name for base in node.bases):
            return None  # an instance may be of the subclass, with more tensors
    return Held(frozenset({owner.name}))


# the statements `_name_classes` reads: those that bind a name to a value
_BINDINGS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With})


def _name_classes(ctx: AstContext, function: Optional[ast.AST], holder: str) -> Optional[Held]:
    """The project classes the function (or the module) binds the name to, through moves and wrappers."""
    scope: ast.AST = function or ctx.tree
    found = Held()
    for statement in all_nodes(scope):
        if type(statement) not in _BINDINGS:
            continue  # (every other node, defs and the scope itself included, binds nothing read here)
        targets: list[ast.expr] = []
        value: Optional[ast.expr] = None
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With)):
            named = [statement.target] if not isinstance(statement, ast.With) else [
                i.optional_vars for i in statement.items if i.optional_vars is not None]
            if any(n.id == holder for t in named for n in walk_nodes(t) if isinstance(n, ast.Name)):
                return None  # bound some other way: not known
            continue
        if len(targets) == 1 and type(targets[0]) is ast.Name:  # `x = ...`, most assignments: no walk
            if targets[0].id != holder:
                continue
        elif not any(n.id == holder for t in targets for n in walk_nodes(t) if isinstance(n, ast.Name)):
            continue
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) or value is None:
            return None
        built = _built_classes(ctx, value, lambda v: isinstance(v, ast.Name) and v.id == holder, function)
        if built is None:
            return None
        found |= built
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            a.arg == holder for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)):
        return None  # handed in by the caller
    return found or None


def _part_of_name(ctx: AstContext, function: Optional[ast.AST], held: ast.Attribute) -> Optional[Held]:
    """`model.fc` for a name bound only to instances of classes of this file over nn.Module alone: what the
    methods of each bind `self.fc` to (`_class_attribute`). None where the file binds that attribute on
    anything else (`model.fc = nn.Linear(...)` after building it) or by name (`setattr`)."""
    assert isinstance(held.value, ast.Name)
    owners = _name_classes(ctx, function, held.value.id)
    if owners is None or owners.inline is not None or not owners.classes:
        return None
    attr = held.attr
    for node in all_nodes(ctx.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            return None
    classes = {n.name: n for n in ctx.tree.body if isinstance(n, ast.ClassDef)}
    found = Held()
    for spelled in owners.classes:
        owner = classes.get(spelled)
        facts = ctx.project.class_facts(spelled)
        if owner is None or facts is None or not facts.module or facts.bases != ("torch.nn.Module",):
            return None  # a class of another module, or one whose base may bind the attribute too
        methods = {id(n) for n in owner.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in all_nodes(ctx.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and node.attr == attr \
                    and not any(id(a) in methods for a in ctx.ancestors(node)):
                return None  # bound outside the class's methods
        part = _class_attribute(ctx, owner, attr)
        if part is None:
            return None
        found |= part
    return found or None


def _self_name(function: Optional[ast.AST]) -> Optional[str]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.decorator_list:
        return None  # a static or class method, a property: its first parameter is not the instance
    positional = function.args.posonlyargs + function.args.args
    return positional[0].arg if positional else None


def _attribute_classes(ctx: AstContext, function: Optional[ast.AST], held: ast.Attribute) -> Optional[Held]:
    """What the methods of the class around `function` bind `self.<attr>` to (`_class_attribute`); None where
    `held` is not an attribute of the method's instance."""
    me = _self_name(function)
    owner = ctx.parent(function) if function is not None else None
    if me is None or not isinstance(owner, ast.ClassDef) or not isinstance(held.value, ast.Name) \
            or held.value.id != me:
        return None
    return _class_attribute(ctx, owner, held.attr)


def _class_attribute(ctx: AstContext, owner: ast.ClassDef, attr: str) -> Optional[Held]:
    """The classes that the methods of `owner` bind `self.<attr>` to (`self.model = LGCN_Encoder(...)` in
    `__init__`, and moves or deep copies of it), and the torch.nn modules they write inline for it
    (`nn.Sequential(nn.Linear(d, k), nn.Softmax(dim=-1))`); None where any binding is something else, the
    attribute is bound by name (`setattr`), or a class of the file derives from this one. What a base class,
    or a subclass in another module, binds it to is not read."""
    if any(isinstance(other, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == owner.name for b in other.bases)
           for other in ctx.tree.body):
        return None  # a subclass may bind the attribute to a model of its own
    found = Held()
    for method in owner.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        instance = _self_name(method)
        for statement in all_nodes(method):
            if isinstance(statement, ast.Call) and isinstance(statement.func, ast.Name) \
                    and statement.func.id == "setattr":
                return None
            if not (isinstance(statement, ast.Attribute) and isinstance(statement.ctx, ast.Store)
                    and statement.attr == attr):
                continue
            if instance is None or not (isinstance(statement.value, ast.Name) and statement.value.id == instance):
                return None  # bound where the instance is not known, or on another object of that attribute
            bound = next((s for s in all_nodes(method) if isinstance(s, ast.Assign) and s.targets == [statement]),
                         None)
            if bound is None:
                return None  # a tuple target, an augmented or annotated assignment, a loop: not read

            def itself(value: ast.expr, instance: str = instance) -> bool:
                return isinstance(value, ast.Attribute) and value.attr == attr and isinstance(value.value, ast.Name) \
                    and value.value.id == instance

            built = _built_classes(ctx, bound.value, itself, None, inline=True)
            if built is None:
                return None
            found |= built
    return found or None


def _built_classes(ctx: AstContext, value: ast.expr, itself: Callable[[ast.expr], bool],
                   function: Optional[ast.AST], inline: bool = False) -> Optional[Held]:
    """The class a binding of the holder builds (through moves and wrappers of the module), nothing for a
    move, wrapper or deep copy of the holder itself (`itself`; also through a name bound once to such a copy,
    `best = copy.deepcopy(self.model)`), with `inline` (an attribute a class binds) the tensors of a torch.nn
    module written inline, the classes of a moved attribute of `self` where `function` is a method
    (`model = self.model.cuda()`), None for anything else."""
    while isinstance(value, ast.Call):
        func = value.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        qualified = ctx.qualname(func)
        if isinstance(func, ast.Attribute) and last in _SAME_MODULE_METHODS:
            value = func.value
        elif last in _SAME_MODULE_WRAPPERS and value.args:
            value = value.args[0]
        elif _copy_of(ctx, value, itself):
            return Held()
        elif inline and qualified is not None and qualified.startswith("torch.nn."):
            tensors = inline_tensors(value, lambda f: {q} if (q := ctx.qualname(f)) else set())
            return None if tensors is None else Held(inline=tensors)
        elif isinstance(func, ast.Name) and last[:1].isupper():
            return Held(frozenset({qualified or last}))  # `from heads import RegLog`: known as `heads.RegLog`
        else:
            return None
    if itself(value):
        return Held()
    if isinstance(value, ast.Name):
        copied = single_value(value, ctx.names)  # `self.model = best` after `best = copy.deepcopy(self.model)`
        return Held() if copied is not None and _copy_of(ctx, copied, itself) else None
    if function is not None and isinstance(value, ast.Attribute):
        return _attribute_classes(ctx, function, value)
    return None


def _copy_of(ctx: AstContext, value: ast.expr, itself: Callable[[ast.expr], bool]) -> bool:
    """`copy.deepcopy(<the holder>)`: a module of the same classes and tensors."""
    return isinstance(value, ast.Call) and ctx.qualname(value.func) == "copy.deepcopy" and len(value.args) == 1 \
        and not value.keywords and itself(value.args[0])


def _head_only(ctx: AstContext, held: Optional[Held]) -> bool:
    """The optimizer's parameters are those of a project class that is a small head (project/facts.py
    ClassFacts.head: one or two Linear layers, norms and pooling aside): a linear probe over features computed
    elsewhere, whose step updates a handful of tensors."""
    project = ctx.project
    return held is not None and held.inline is None and bool(held.classes) and all(
        (found := project.class_facts(c)) is not None and found.head for c in held.classes)


# a fused kernel replaces the update's per-tensor launches: over at most this many tensors there are at most a
# handful of launches to save
FEW_TENSORS = 4


def _zero_partitioned(ctx: AstContext) -> bool:
    """Every DeepSpeed config the file writes (`{"zero_optimization": {"stage": N}}`) shards the optimizer
    (N >= 1, read through a conditional expression its argparse defaults decide): DeepSpeed then hands the
    torch optimizer one flat fp32 partition per param group, so a fused kernel has no loop to replace."""
    stages: list[Optional[int]] = []
    for node in ctx.nodes(ast.Dict):
        assert isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "zero_optimization":
                stage = next((v for k, v in zip(value.keys, value.values)
                              if isinstance(k, ast.Constant) and k.value == "stage"), None) \
                    if isinstance(value, ast.Dict) else None
                stages.append(_stage(ctx, stage))
    return bool(stages) and all(s is not None and s >= 1 for s in stages)


def _stage(ctx: AstContext, value: Optional[ast.expr]) -> Optional[int]:
    """A ZeRO stage as written: an int literal, or the branch of `0 if args.dp == 1 else 3` that the option's
    argparse default takes; None where unknown."""
    if isinstance(value, ast.Constant) and type(value.value) is int:
        return value.value
    if isinstance(value, ast.IfExp):
        taken = _by_default(ctx, value.test)
        return None if taken is None else _stage(ctx, value.body if taken else value.orelse)
    return None


_COMPARISONS: dict[type, Callable[[object, object], bool]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,  # type: ignore[operator]
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,  # type: ignore[operator]
}


def _by_default(ctx: AstContext, test: ast.expr) -> Optional[bool]:
    """`args.dp == 1` (an option compared with a literal) under the option's argparse default; None where
    the test has another shape or the default is unknown."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS
            and isinstance(test.left, ast.Attribute) and isinstance(test.left.value, ast.Name)
            and isinstance(test.comparators[0], ast.Constant)):
        return None
    default = ctx.project.argparse_default(test.left.attr)
    literal = test.comparators[0].value
    if default is None or type(default) not in (int, float, str) or type(literal) not in (int, float, str) \
            or isinstance(default, str) != isinstance(literal, str):
        return None
    return _COMPARISONS[type(test.ops[0])](default, literal)


def _few_tensors(ctx: AstContext, held: Optional[Held]) -> bool:
    """The optimizer's parameters are those of project classes each of which visibly holds at most FEW_TENSORS
    parameter tensors, counting the project classes it builds (project/facts.py ClassFacts.tensors), or of
    torch.nn modules written inline that hold as few (project/layers.py `inline_tensors`): two embedding
    tables of a matrix-factorisation or LightGCN recommender, a linear probe's one Linear."""
    if not held or (held.inline is not None and held.inline > FEW_TENSORS):
        return False
    for name in held.classes:
        found = _tensors(ctx.project, name, local=True, depth=0)
        if found is None or found > FEW_TENSORS:
            return False
    return True


def _tensors(project: ProjectView, name: str, local: bool, depth: int) -> Optional[int]:
    """The parameter tensors of a module class and the project classes it builds; None when any is unread.
    `local`: `name` is spelled as this file spells it (else its parts must be project keys, `path::Name`)."""
    found = project.class_facts(name)
    if found is None or depth > 4:
        return None
    if not found.module:
        return 0 if depth and found.dataset is None else None  # a plain object a module holds registers nothing
    if found.tensors is None:
        return 0 if found.weightless else None  # a module with methods only (`Flatten`): no weight
    total = found.tensors
    for layer in found.layers or ():
        if layer.kind != MODULE:
            continue
        if not local and PART not in layer.name:
            return None
        part = _tensors(project, layer.name, local and name in project.own.classes, depth + 1)
        if part is None:
            return None
        total += part
        if total > FEW_TENSORS:
            break
    return total


_ALWAYS, _SOMETIMES = "always", "sometimes"
_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.IfExp, ast.Match)


def _wrapped_by_rate_loop(ctx: AstContext, node: ast.Call) -> str:
    """Whether the optimizer is handed to apex's LARC or torchlars' LARS (core/torch_api.py
    ADAPTIVE_RATE_WRAPPERS), directly (`LARC(SGD(...))`) or through the name it is bound to in the same
    function (`optimizer = SGD(...)` then `optimizer = LARC(optimizer=optimizer, ...)`): the wrapper's step
    walks the parameters in Python. _ALWAYS when the wrap runs whenever the optimizer is built, _SOMETIMES
    when a branch the optimizer's statement is not in holds it (`if args.lars:`), "" when none wraps it."""
    if "LAR" not in ctx.text:
        return ""

    def wrapped(call: Optional[ast.AST]) -> Optional[ast.expr]:
        if not isinstance(call, ast.Call) or ctx.qualname(call.func) not in ADAPTIVE_RATE_WRAPPERS:
            return None
        given = next((k.value for k in call.keywords if k.arg == "optimizer"), None)
        if given is None and call.args and not isinstance(call.args[0], ast.Starred):
            given = call.args[0]
        return given

    if wrapped(ctx.parent(node)) is node:
        return _ALWAYS
    statement = ctx.statement(node)
    if not isinstance(statement, ast.Assign) or statement.value is not node or len(statement.targets) != 1 \
            or not isinstance(statement.targets[0], ast.Name):
        return ""
    bound = statement.targets[0].id
    scope: ast.AST = ctx.enclosing_function(node) or ctx.tree
    around = {id(a) for a in ctx.ancestors(statement)}
    found = ""
    for call in all_nodes(scope):
        given = wrapped(call)
        if not (isinstance(given, ast.Name) and given.id == bound and given.lineno > statement.lineno):
            continue
        if not any(isinstance(a, _BRANCHES) for a in ctx.ancestors(call) if id(a) not in around):
            return _ALWAYS
        found = _SOMETIMES
    return found


def _single_tensor(ctx: AstContext, node: ast.Call, kwargs: AstKeywordArgs) -> bool:
    """The params are one tensor, so a fused step launches as many kernels as the loop it replaces: a
    one-element list or tuple of a tensor (`[latent]`, `[nn.Parameter(...)]`,
    `[torch.zeros(n, requires_grad=True)]`, `[x.clone().requires_grad_()]`, also through a name bound once to
    it), param-group dicts that hold one tensor between them (`[{"params": p}]` for each `p` of a loop over
    `unet.parameters()`: `_group_tensors`), or the `.parameters()` of a module that holds one tensor: an inline
    torch.nn layer of one tensor
    (`nn.Embedding(n, d).parameters()`, project/layers.py `inline_tensors`) or a model's input embedding table
    (`text_encoder.get_input_embeddings().parameters()`: transformers' `nn.Embedding`, one weight)."""
    name, _ = OPTIMIZER_PARAMS
    params = kwargs.get(name) if kwargs.passed(name) else next(
        (a for a in node.args if not isinstance(a, ast.Starred)), None)
    while isinstance(params, ast.Call) and isinstance(params.func, ast.Name) and params.func.id in ("filter", "list") \
            and params.args:
        params = params.args[-1]
    if isinstance(params, ast.Name):
        bound = params.id
        if any(isinstance(n, ast.Attribute) and n.attr in ("append", "extend", "insert")
               and isinstance(n.value, ast.Name) and n.value.id == bound for n in all_nodes(ctx.tree)):
            return False  # a list the code grows
        params = single_value(params, ctx.names)
    if isinstance(params, (ast.List, ast.Tuple)):
        if params.elts and all(isinstance(e, ast.Dict) for e in params.elts):
            return _group_tensors(ctx, params.elts) == 1  # `[{"params": p, "lr": lr}]`: the groups' tensors summed
        if len(params.elts) != 1:
            return False
        element = params.elts[0]
        if isinstance(element, (ast.Starred, ast.Dict)):
            return False
        return not isinstance(element, ast.Call) or _builds_one_tensor(ctx, element)
    if not (isinstance(params, ast.Call) and isinstance(params.func, ast.Attribute)
            and params.func.attr == "parameters" and not params.args and not params.keywords):
        return False
    module = params.func.value
    while isinstance(module, ast.Call) and isinstance(module.func, ast.Attribute) \
            and module.func.attr in _SAME_MODULE_METHODS:
        module = module.func.value  # `nn.Embedding(n, d).to(device)`: the same module
    if not isinstance(module, ast.Call):
        return False
    if isinstance(module.func, ast.Attribute) and module.func.attr == "get_input_embeddings" \
            and not module.args and not module.keywords:
        return True
    qualified = ctx.qualname(module.func)
    if qualified is None or not qualified.startswith("torch.nn."):
        return False
    return inline_tensors(module, lambda f: {q} if (q := ctx.qualname(f)) else set()) == 1


def _group_tensors(ctx: AstContext, groups: list[ast.expr]) -> Optional[int]:
    """How many tensors these param-group dicts hold between them, None where one of them is not read: each
    group's `"params"` is a list or tuple of tensors (as `_single_tensor` reads one), a tensor built in
    place, or a name shown to be one tensor (`_tensor_name`); torch wraps a lone tensor in a list."""
    total = 0
    for group in groups:
        if not isinstance(group, ast.Dict) or any(k is None for k in group.keys):
            return None  # `{**base, ...}`: what it holds is not read
        keys = [k.value if isinstance(k, ast.Constant) else None for k in group.keys]
        if None in keys or keys.count("params") != 1:
            return None
        value = group.values[keys.index("params")]
        if isinstance(value, (ast.List, ast.Tuple)):
            for element in value.elts:
                if isinstance(element, (ast.Starred, ast.Dict)) or (
                        isinstance(element, ast.Call) and not _builds_one_tensor(ctx, element)):
                    return None
            total += len(value.elts)
        elif isinstance(value, ast.Call) and _builds_one_tensor(ctx, value) \
                or isinstance(value, ast.Name) and _tensor_name(ctx, value):
            total += 1
        else:
            return None  # `{"params": model.parameters()}`, a name that may be a list
    return total


def _tensor_name(ctx: AstContext, name: ast.Name) -> bool:
    """Every binding of the name is one parameter tensor: the parameter a loop or comprehension over
    `<module>.parameters()` (or the second of `named_parameters()`) binds, or the one parameter of a function
    the file only ever registers with `<tensor>.register_post_accumulate_grad_hook(...)`, which torch calls with
    the tensor whose gradient was accumulated (LISA's per-parameter optimizers)."""
    names = ctx.names
    owner = names.binding_scope(name)
    if owner is None or any(v is not None for v in owner.values.get(name.id, [None])):
        return False  # unbound, or bound by an assignment somewhere
    shown = 0
    for loop in ctx.nodes(ast.For, ast.AsyncFor, ast.comprehension):
        assert isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension))
        it, target = loop.iter, loop.target
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("parameters", "named_parameters")):
            continue
        if isinstance(target, ast.Tuple) and it.func.attr == "named_parameters" and len(target.elts) == 2:
            target = target.elts[1]
        elif it.func.attr != "parameters":
            continue
        if isinstance(target, ast.Name) and target.id == name.id and names.binding_scope(target) is owner:
            shown += 1
    if isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _gradient_hook(ctx, owner.node) \
            and owner.node.args.args[0].arg == name.id:
        shown += 1
    return shown == len(owner.bindings[name.id])


def _gradient_hook(ctx: AstContext, function: "ast.FunctionDef | ast.AsyncFunctionDef") -> bool:
    """A function of one positional parameter whose name the file reads only as the argument of
    `<tensor>.register_post_accumulate_grad_hook(<function>)`, at least once."""
    args = function.args
    if args.posonlyargs or len(args.args) != 1 or args.vararg or args.kwonlyargs or args.kwarg:
        return False
    uses = [n for n in ctx.named(function.name) if isinstance(n.ctx, ast.Load)]
    for use in uses:
        call = ctx.parent(use)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_post_accumulate_grad_hook" and call.args == [use]
                and not call.keywords):
            return False
    return bool(uses)


# torch functions that build one new tensor (`torch.zeros(n, requires_grad=True)`), and tensor methods that hand
# back one (`x.clone().detach().requires_grad_()`)
_TENSOR_FACTORIES = frozenset({"torch.tensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand",
                               "torch.randn", "torch.randint", "torch.zeros_like", "torch.ones_like",
                               "torch.empty_like", "torch.full_like", "torch.rand_like", "torch.randn_like",
                               "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_ONE_TENSOR_METHODS = frozenset({"requires_grad_", "detach", "clone", "cuda", "to", "float", "half", "double",
                                 "contiguous", "detach_"})


def _builds_one_tensor(ctx: AstContext, call: ast.Call) -> bool:
    """`nn.Parameter(...)`, a torch tensor factory, or a tensor method that returns its tensor over one of those
    or over a name (`latent.clone().requires_grad_()`)."""
    qualified = ctx.qualname(call.func)
    if qualified in _TENSOR_FACTORIES:
        return True
    if isinstance(call.func, ast.Attribute) and call.func.attr in _ONE_TENSOR_METHODS:
        inner = call.func.value
        if isinstance(inner, ast.Call):
            return _builds_one_tensor(ctx, inner)
        return isinstance(inner, (ast.Name, ast.Attribute, ast.Subscript))
    return False


def _has_momentum(ctx: AstContext, node: ast.Call, kwargs: AstKeywordArgs) -> bool:
    """SGD(params, lr, momentum, ...): a momentum buffer exists unless momentum is visibly 0."""
    name, position = SGD_MOMENTUM
    if kwargs.passed(name):
        return not is_literal(ctx, kwargs.get(name), "0")
    if positional_args(node) is None:
        return True
    value = arg(node, name, position, kwargs)
    if value is None:
        return False
    return not (is_literal(ctx, value, "0") or (isinstance(value, ast.Constant) and type(value.value) is float
                                                and value.value == 0.0))


def _plain_sgd(ctx: AstContext, node: ast.Call, kwargs: AstKeywordArgs) -> bool:
    """SGD whose update is one add per parameter: no momentum, weight decay or Nesterov, over parameters
    that cannot be param groups carrying their own (built from a `.parameters()` call, with no dict)."""
    if _has_momentum(ctx, node, kwargs) or kwargs.passed("nesterov"):
        return False
    if kwargs.passed("foreach") and not is_literal(ctx, kwargs.get("foreach"), "True", "None"):
        return False  # foreach=False: one add per parameter, a kernel each, which a fused step would merge
    if kwargs.passed("maximize") and not is_literal(ctx, kwargs.get("maximize"), "False"):
        return False  # maximize negates the gradients first: a second pass over them
    name, position = SGD_WEIGHT_DECAY
    decay = arg(node, name, position, kwargs)
    if decay is not None and not (is_literal(ctx, decay, "0") or (
            isinstance(decay, ast.Constant) and type(decay.value) is float and decay.value == 0.0)):
        return False
    params = node.args[0] if node.args and not isinstance(node.args[0], ast.Starred) else kwargs.get("params")
    if params is None or any(isinstance(n, ast.Dict) for n in walk_nodes(params)):
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parameters"
               for n in walk_nodes(params))


def may_gain_grad_scaler(ctx: AstContext) -> bool:
    """gpulint's own float16 mixed-precision fix (GPU001/GPU002) may add a GradScaler to this file, or to a
    module it imports that trains with an unscaled step (ProjectView.unscaled_training_importees), in the
    same fix run: GPU201 then offers no fused-SGD fix, since fused SGD with momentum breaks
    under a scaler. Once the scaler exists, GPU201 sees it and leaves SGD alone, so the two fixes
    agree in whichever order they are applied. The training steps are GPU001/GPU002's, found on `ast`
    (analysis/amp_steps.py): GPU201 never parses LibCST to decide.
    """
    settings = ctx.settings
    if settings.value(AMP_DTYPE) == "bfloat16" or ("backward" not in ctx.text
                                                   and not ctx.project.unscaled_training_importees):
        return False
    if not any(settings.is_enabled(rule.code) for rule in (MissingAutocast, Fp16WithoutGradScaler)):
        return False
    project = ctx.project
    if project.rl or project.mixed_precision and "autocast" not in project.own.mixed_precision:
        return False  # MissingAutocast stays silent there (precision handled, or an environment-bound loop)
    # the step may live in a module this one imports (HRNet: SGD built in tools/train.py, stepped in
    # lib/core/function.py, where GPU001's fix writes the scaler)
    # a step GPU001 leaves alone in an environment loop (OFF_ENVIRONMENT) gains no scaler either
    steps = ctx.analysis(amp_steps)
    return steps.unscaled and any(not b.scaled and not waits_on_environment(ctx, b.call) for b in steps.backwards) \
        or project.unscaled_training_importees

