"""GPU001 missing-autocast: a training step computes its forward pass and loss in fp32."""

from __future__ import annotations

import ast
import re
from functools import partial
from typing import TYPE_CHECKING, Callable, Optional

from gpulint.analysis.amp import Coverage
from gpulint.analysis.amp_fix import autocast_fix
from gpulint.analysis.amp_regions import AmpRegions, amp_regions
from gpulint.analysis.amp_steps import TRAINING_STEP_NEEDLES, AmpStep
from gpulint.analysis.ast_context import AstContext, Detection
from gpulint.analysis.benchmarks import NOT_BENCHMARK, benchmark_step
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise
from gpulint.analysis.frameworks import TORCH_CODE, other_framework, torch_code
from gpulint.analysis.lr_sweep import LONG_RUN, step_run
from gpulint.analysis.model_widths import optimizes_inputs, trained_model_width
from gpulint.analysis.reach import OFF_ENVIRONMENT, RUNS, off_environment, runs
from gpulint.analysis.sigmoid_losses import logs_one_minus_model_sigmoid
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.options import Choice, Integer, Option
from gpulint.core.settings import Settings
from gpulint.core.verification import MIXED_PRECISION, Verification, construct_enabled
from gpulint.project.view import ProjectView
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis.training import Backward, TrainingFacts, TrainingStep
    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix
    from gpulint.rewrites.amp_plan import Region

AUTOCAST_SINCE = floors.since(floors.AUTOCAST)
CUDA_AMP_SINCE = (1, 6)  # torch.cuda.amp.autocast and torch.cuda.amp.GradScaler: the advice below 1.10
SIXTEEN_BIT = re.compile(r"\b(?:bfloat16|float16|half)\b")
MIN_WIDTH: Option[int] = Option(
    "min-width", Integer(1), 128,
    "GPU001 stays silent when every layer width of the trained model is known and below this "
    "(launch-bound models gain nothing from tensor cores; a roofline model, not a GPU measurement: bench/amp_width.py)")

ON_GPU = Premise(
    "on-gpu",
    "the step runs on a CUDA GPU (CUDA evidence in the file or a caller: a \"cuda\" string, torch.cuda, "
    "`.cuda()`, an integer device such as `.to(local_rank)` or `device = 0`, a copy to a device that a "
    "project module the file imports binds to CUDA, `x.to(CFG.device)`; a copy to `self.device`, made in the "
    "file's class or in a method it inherits, that the base classes of that class, followed through the "
    "project modules they are imported from (relative imports too, to any depth), bind only to devices naming "
    "CUDA, every base on the way being `object` or a project class, so that none of unknown origin could bind "
    "it otherwise; or a copy to `opt.device` where every assignment `opt = ...` in the file (in any scope; no "
    "`for` or `with` binds `opt`) is a call of a function or method of a project module the file imports "
    "(`opt = OptInit().get_args()`, one call, resolved through the imports) that binds the `device` of the "
    "object it returns only to devices naming CUDA: every binding visible counts, an argparse `--device` "
    "default of that module included, and one that names no CUDA, or a binding of `opt.device` in the file, "
    "leaves it unknown), "
    "or on an XPU whose device the "
    "fix can name (`device.type`). Refuted on a TPU, MPS or the CPU alone, and on an XPU whose device the "
    "fix would have to hard-code as CUDA.")
FP32 = Premise(
    "fp32",
    "the forward pass and the loss run in fp32: no autocast covers them (here, in a decorator or in the "
    "model's own `forward`), the weights are not 16-bit (`.half()`, `.to(torch.bfloat16)`, "
    "`torch_dtype=torch.bfloat16`, a model from OpenAI CLIP's `clip.load(...)` on a device other than \"cpu\" "
    "and never `.float()`-ed (CLIP converts its weights to float16), a name bound only to a 16-bit dtype in "
    "`.to(param_dtype)`, layers built "
    "with `dtype=cfg[\"dtype\"]` where every config of the file gives \"dtype\" a 16-bit type, or a model "
    "from a function of the file or of a project module it imports that is handed a 16-bit dtype and casts "
    "every parameter of its model to it: `assert all(p.dtype == dtype for p in model.parameters())`, "
    "`p.data = p.data.to(dtype)`, or `.to(dtype)` on the model it returns), and no other mechanism (FSDP "
    "MixedPrecision, apex, DeepSpeed, layers casting weights) is used around it. A GradScaler alone is not "
    "mixed precision: a step that scales its loss but never enters autocast trains in fp32. Undecided when "
    "autocast is used in a way gpulint cannot link to the step: in a caller, or in a module a caller imports "
    "that trains nothing itself (an autocast helper); a sibling trainer the caller also imports, with its own "
    "autocast step, is no link.")
TRAINS_A_MODEL = Premise(
    "trains-a-model",
    "the step updates a model's parameters: refuted when every optimizer of the step is handed only tensors "
    "the file makes trainable itself (`[target]` after `target = content.clone().requires_grad_(True)`, "
    "`torch.randn(..., requires_grad=True)`): an image or latent optimised through a frozen network (style "
    "transfer, GAN inversion), whose feature statistics (Gram matrices of a VGG's activations) overflow "
    "float16 and whose network may run its own precision.")
WIDE_ENOUGH = Premise(
    "wide-enough",
    "the model is wide enough for tensor cores to matter: refuted when every layer width of the model the "
    "optimizer updates is known (literals, argparse and dataclass defaults, values the project passes, "
    "the optimizer a module-level step function is handed by each call of it where the file only calls it, and "
    "the model it is handed so: the widest of them; a model chosen by a "
    "conditional expression, `A(...) if atari else B(...)`, is as wide as its wider branch) and "
    "the widest is below `min-width`. An argparse default counts from the file or, where the file declares "
    "no such option, from the files around it (its callers, the modules they import, the modules it imports) "
    "when they agree on it, `parser.set_defaults(...)` included (it gives an option declared without `default=` "
    "its default, in either order); a trainer's `self.model` and `self.optimizer` "
    "are the values its class assigns them. A module handed to a wrapper's constructor, kept on self and "
    "called in any of its methods (`Diffusion(model=self.model)`, whose `loss` calls `self.model(...)`), is "
    "part of the wrapper and as wide as the module passed, read where it is built; unknown where that one is "
    "(blind25: a diffusion policy's toy experiments). A layer is as wide as its smallest known size: a matmul with one "
    "side a few units wide reads its input more than it multiplies (a Linear to 5 classes: about 2.5 "
    "multiply-adds per fp32 byte read), so a probe's `Linear(n_features, 5)` is 5 wide whatever "
    "`n_features` is; a convolution is bounded by its smaller channel count times its kernel size; a weight "
    "`nn.Parameter(torch.FloatTensor(a, b).cuda())` has the factory's shape. A recurrent layer multiplies its "
    "hidden state by gates x hidden every step, so it is at least `hidden_size` wide, and its input matmul as "
    "wide as the smaller of the input size and gates x hidden (2 x hidden for the later layers of a stacked or "
    "bidirectional one); unknown without `hidden_size`. A layer built in a loop over the consecutive pairs of a list "
    "(`[in] + args.layers + [out]`, `dims[i]` and `dims[i + 1]`, or `zip(dims[:-1], dims[1:])`) is as wide as "
    "its widest pair, each pair as wide as its smaller known entry: with a list-valued option known and not "
    "empty (`nargs=\"+\", default=[16, 16, 16]`), at most its largest entry, whatever `in` and `out` are. "
    "A quantum-circuit simulator's module (torchquantum's `tq.*`, a `tq.QuantumModule` base included, PennyLane's "
    "`qml.qnn.TorchLayer`, Qiskit machine learning's `TorchConnector`; resolved through the imports, also where "
    "the project is the library) adds no width: its state is a vector of complex amplitudes that each gate "
    "multiplies by a 2x2 or 4x4 matrix, autocast casts only real floating-point matmuls (a complex64 matmul "
    "stays complex64 under it), and its sizes are qubit counts; a model built only of them is refuted, a "
    "hybrid is as wide as its torch.nn layers (blind24: torchquantum's examples). "
    "An unknown width is not a small one.")
ENOUGH_WORK = Premise(
    "enough-work",
    "a step multiplies enough rows for its width: refuted when the rows it feeds are known from a standard "
    "benchmark dataset (Cora trained full-batch: 2,708 rows; PROTEINS in batches of 32: 32 x 39 nodes; "
    "torchvision's MNIST, CIFAR, SVHN or USPS held in memory, in batches of a known size and never resized: "
    "batch x side rows for a model of Linear layers only, batch x side^2 for any other) and "
    "rows x width^2 of the widest known layer stays below 8e8, where the best speed-up of bench/amp_width.py's "
    "roofline model (a modelled estimate, not a GPU measurement) stays under 1.5x (3,400 rows at 512 wide). "
    "Unknown rows or width are not small ones.")
AUTOCAST_EXISTS = Premise(
    "autocast-exists",
    "every torch the project supports has mixed precision (`torch.cuda.amp`, 1.6; the fix writes `torch.autocast`, "
    "1.10, and where the project supports an older torch the finding says `torch.cuda.amp` and has no fix): "
    "refuted when the floor it declares is older than 1.6 (a `torch==1.0.1` pin) or its code runs only on a "
    "torch older than 1.6 (a file of the project builds its extension with `torch.utils.ffi`, gone in 1.0; it "
    "asserts an older major version at module level, `assert torch.__version__.split('.')[0] == '0'`; it reads a "
    "loss it calls `.backward()` on as `loss.data[0]`, an IndexError from 1.0 on); undecided when no floor is "
    "declared and the code runs only on torch 1.10 or older (it, or a module it imports, unconditionally imports "
    "a module gone by 1.11: torchtext's `Field`/`BucketIterator`, gone with torch 1.8, or `torchtext.legacy`; a "
    "helper module that only defines, outside any package others install (no `__init__.py` beside it, or no "
    "setup.py, setup.cfg or pyproject.toml that builds a distribution at or above its folder), runs only under "
    "the project files that import it: "
    "where each of them has such a ceiling, so does it). Below 1.10 CUDA autocast is float16 only, so refuted "
    "there too when a `forward` of the file or of a module it imports (four levels) holds a literal past "
    "float16's range: `masked_fill(mask, -1e9)` raises under float16 autocast (Pyraformer, torch 1.8).")
GPU_BOUND = Premise(
    "gpu-bound",
    "the loop waits on the GPU: refuted in reinforcement-learning loops (the file imports an environment "
    "package, anywhere in the file: inside a function or a notebook cell counts too), and where a framework "
    "(Lightning, Accelerate, Fabric, DeepSpeed) owns precision.")
AUTOCAST_COVERS = Premise(
    "autocast-covers",
    "autocast covers the kernels the model runs: refuted with sparse tensors made in the file or a module it "
    "imports (two levels; sparse kernels are outside autocast and fail on 16-bit activations); undecided where "
    "the file or a module of its import closure (every depth, cycles followed once; conditional imports, relative "
    "imports and a package `__init__`'s re-exports followed, and the file's own imports in functions: blind20's "
    "semseg imports PSANet in a function, five modules above the package that builds its kernels; an import in a "
    "function of a module below runs only when called so, and is not followed: BigVGAN's generator imports its "
    "CUDA activation only under an inference-only option) builds the project's own native kernels with "
    "`torch.utils.cpp_extension.load`/`load_inline`, or imports an extension module the project's setup.py "
    "compiles (`CUDAExtension`/`CppExtension`, or a name bound to one: `extension = CUDAExtension`): such kernels "
    "often take fp32/fp16 only, or read an fp32 parameter as the input's dtype, and autocast breaks them. Undecided "
    "too where the model comes from a caller (a module that imports the file, in a function too: Deformable DETR's "
    "main.py builds the model its engine.py steps) whose import closure holds a module of that reach whose "
    "`forward` hands what its own linear or convolution layer returned, reshaped at most, to a custom autograd "
    "Function (`MSDeformAttnFunction.apply(value, ...)` after `value = self.value_proj(x).view(...)`): 16-bit "
    "under autocast, and `apply` does not cast it. A caller's reach alone does not count: RWKV hands its CUDA "
    "op `torch.exp(k)` and `k * v`, fp32 under autocast, and trains with it (blind13). An extension built for "
    "something the model does not run keeps GPU001 silent too (unknown is silence). Refuted too where a "
    "`forward` of the file or of a "
    "module it imports (four levels) writes what a submodule returns into a float32 buffer it made, through a "
    "mask (`rgb = torch.zeros(n, 3, device=d)`, then `rgb[mask] = self.render(x)`): under autocast the output "
    "is 16-bit and index_put requires matching dtypes, so the first step raises (TensoRF). Refuted as well where "
    "the file compiles a module with `torch.jit.script` and the project's torch is older than 1.10, whose "
    "`torch.cuda.amp.autocast` TorchScript does not follow: a scripted model's backward fails on the mixed dtypes "
    "(pytorch#25387; blind17: FragmentVC scripts its model and pins torch 1.6).")
LOSS_FITS_16_BIT = Premise(
    "loss-fits-16-bit",
    "the loss holds in 16 bits: refuted where a function of the file, or of a module it imports (three levels: the "
    "model's `forward` often returns the project's loss), clamps a value to an upper bound `1 - eps` "
    "(`torch.clamp(p, eps, 1.0 - eps)`, `p.clamp_(max=1 - EPS)`, `clip`; eps a literal or a name bound once to "
    "one) and takes `log(1 - p)` or `log1p(-p)` of the clamped value, with eps <= 2**-9. Under autocast `p` is "
    "16-bit and so is the bound: no bfloat16 lies between 1 - 2**-8 and 1 (no float16 between 1 - 2**-11 and 1), "
    "so 1 - eps rounds to 1.0 in bfloat16 when eps <= 2**-9 (in float16 when eps <= 2**-12), a confident "
    "prediction stays 1.0 and `log(0)` is -inf: a NaN loss where fp32 trains (a focal loss's `1.0 - 1e-4`; "
    "measured with torch 2.13 on the CPU under bfloat16 and float16 autocast). A value cast to float32 before "
    "the clamp does not count, nor does a clamp no `log(1 - p)` reads. So does `log(1 - sigmoid(x))` (or "
    "`log1p(-sigmoid(x))`, or of a name bound to the sigmoid in the same function) with no clamp at all: a "
    "16-bit sigmoid is 1.0 from a logit of 7 in bfloat16 (9 in float16; 17 in fp32; torch 2.13 on the CPU), so "
    "a confident negative makes the loss inf (caser_pytorch's negative-sample loss, blind18). So does "
    "`log(1 - p)`, `log(1 - p + eps)` or `log1p(-p)` in the step, or in a function of the file the step hands `p` "
    "to, where `p` is what a model of the project returns (the name bound to its call; the model through its "
    "names, `.to()` moves and the calls of the step's function, its class through the file's imports) whose "
    "`forward` returns a sigmoid (directly, or a name bound only to one): the 16-bit sigmoid is 1.0 from a "
    "logit of about 6.2 in bfloat16 (8.3 in float16; 16.6 in fp32). An eps added after the subtraction does not "
    "help when eps < 2**-9: under half the spacing of bfloat16 just below 1 (2**-8), it cannot stand in for the "
    "1 - p that 16 bits lost. In float16 1e-15 is 0 itself and the loss inf; in bfloat16 the loss is a flat "
    "-log(eps) with a zero gradient (the sigmoid's p(1 - p) is 0): 34.5 from a logit of 8 on, where fp32 gives "
    "8.0 with a gradient of 0.9997 (torch 2.13, CPU autocast; ogbl_collab's link predictor, blind20). A value "
    "cast to float32 before the subtraction does not count.")
# rows x width^2 of a step below which mixed precision cannot pay off: bench/amp_width.py's roofline model
# (host dispatch measured on a CPU, A100 datasheet throughput) reaches 1.5x at 8.3e8-9.2e8; rounded down
STEP_WORK_FLOOR = 800_000_000
_LINEAR_LAYERS = frozenset({"Linear", "Bilinear", "LazyLinear"})
AMP_DTYPE: Option[str] = Option(
    "amp-dtype", Choice(("auto", "float16", "bfloat16")), "auto",
    "the dtype autocast fixes write: auto (bfloat16 where the GPU computes in it natively, else float16 with a "
    "GradScaler, chosen at run time), float16 (with a GradScaler) or bfloat16 (Ampere and newer, no scaler)")


class MissingAutocast(Rule):
    code = "GPU001"
    name = "missing-autocast"
    habit = "mixed-precision"
    summary = "Training step runs its forward pass and loss in fp32 (no autocast)"
    impact = "up to 3x step speed on Volta and newer (PyTorch Tuning Guide); 2-3x (AMP recipe)"
    needles = ("backward",)
    ast_needles = TRAINING_STEP_NEEDLES
    target = Target.GPU
    in_tests = False
    fix = Applicability.UNSAFE
    options = (AMP_DTYPE, MIN_WIDTH)
    verification = Verification(MIXED_PRECISION, ("autocast", "grad_scaler"),
                                "the autocast region the rewrite added is entered", construct_enabled,
                                mixed_precision=True)
    docs = RuleDocs(
        what="""
        Checks for training steps (a loop or function that calls `backward()` on a loss and
        steps an optimizer) whose forward pass and loss are not computed under
        `torch.autocast`, in files that show they run on a GPU. Reported at the
        `backward()` call.
        """,
        why="""
        Without autocast every matmul and convolution runs in fp32 and the GPU's tensor
        cores sit idle. Mixed precision runs them in float16/bfloat16 and keeps fp32 where
        precision matters: the PyTorch Performance Tuning Guide quotes "up to 3x overall
        speedup on Volta and newer GPU architectures", the PyTorch AMP recipe 2-3x, and the
        PyTorch AMP blog (2020) measured 1.5x-5.5x on V100 over fp32. Activations saved
        for backward are mostly stored in 16 bits, which also lowers memory use. Measured on
        CPU, fp16 + GradScaler and bf16 training of small MLPs and CNNs tracked fp32 within
        0.7 % per step over 50 steps. Small networks gain nothing: the AMP recipe
        warns that a network which fails to saturate the GPU is CPU-bound and AMP's effect
        "won't matter". `min-width` (128) comes from a roofline model, not a GPU
        measurement (bench/amp_width.py: host cost per op measured on a CPU, A100 datasheet
        throughput): below 128 wide it puts AMP's best case under 1x up to 64K rows a step.
        """,
        example="""
        device = torch.device("cuda")
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """,
        use_instead="""
        device = torch.device("cuda")
        amp_dtype = (
            torch.bfloat16
            if torch.cuda.is_bf16_supported(including_emulation=False)
            else torch.float16
        )
        scaler = torch.amp.GradScaler(device.type, enabled=(amp_dtype == torch.float16))
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=amp_dtype):
                output = model(data)
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        fix_safety="""
        Unsafe: numerics change (16-bit activations). The fix wraps the forward pass and the
        loss: from the first statement that calls the model and that the loss depends on,
        through the loss assignment. Building a model or an optimizer and waiting on futures
        are never inside; when such a line sits between forward statements, or the loss is
        computed inside the `backward()` call, no fix is offered. `backward()` stays outside.

        The dtype comes from the `amp-dtype` setting. `"auto"` (the default) writes the choice
        once, decided at run time: bfloat16 where the GPU computes in it natively (Ampere and
        newer; `torch.cuda.is_bf16_supported(including_emulation=False)`, since a T4 or V100
        only emulates it, slowly), else float16 with a GradScaler that is enabled on that path
        only; where the device type is chosen at run time, a CPU, Intel GPU or Mac run takes
        bfloat16. `"float16"` writes float16 and a GradScaler that is always on; `"bfloat16"`
        writes no scaler. A GradScaler routes backward, gradient clipping (`unscale_`) and the
        optimizer step through it, on the accumulation boundary when the step is conditional.
        The scaler lives as long as the optimizer: beside a global optimizer; or, when
        `train()` receives the optimizer from a function of the file, created there, passed in
        with the dtype choice (`scaler=None, amp_dtype=None` keep other callers working) and
        saved and loaded with the optimizer's state in checkpoint dicts; else before the step's
        loop, and when that function runs more than once the fix message says what to move.

        The device type is the script's own: the device the step moves tensors to
        (`device.type`, `torch.device(args.device).type`, also a device chosen on several
        branches), else the model's (`next(model.parameters()).device.type`; never a module
        without weights, such as a loss or an activation, on which `next()` raises
        StopIteration), else the batch's (`x.device.type`, bfloat16 only, since no scaler is
        created then), else `"cuda"` (or `"xpu"` in a file that uses Intel GPUs only, which
        also gets bfloat16). No GradScaler when the optimizer stepped is not shown to be a
        torch optimizer: a class of the file without `param_groups`, or one the code calls
        with a method torch optimizers lack (`optimizer.update_lr()`), as a learning-rate
        wrapper is; `scaler.step(wrapper)` would fail. The finding stays, with no fix unless
        `amp-dtype = "bfloat16"`, which needs no scaler.

        bfloat16 whatever `amp-dtype` says, with no scaler: for tensor-parallel (DTensor)
        parameters, and for a fused optimizer under FSDP, whose ShardedGradScaler would skip
        the cross-rank inf check (reproduced on two CPU ranks: bench/fsdp_fused_scaler.py).
        Other FSDP-sharded parameters get `ShardedGradScaler`. A constant float16 cannot hold
        in the forward pass or loss, in a function of the file they call, or in a `forward` of
        the file (`1e-15` added before a log flushes to zero; a `-1e9` mask overflows past
        65504) gets bfloat16 under `"auto"` and no fix under `"float16"`. An output of the
        region read with `.numpy()` or handed to a numpy function (`np.percentile(grad.cpu(), q)`),
        with no cast, in the region or after it in the same block, directly or by a function of
        the file or of a project module it is handed to (a metric's
        `torch.sigmoid(output).cpu().numpy()`), or a value a model `forward` of the file or of a
        module it imports computes and reads so, gets float16 and a GradScaler that is
        always on under `"auto"` (numpy has no bfloat16), and no fix under `"bfloat16"`. So does a model the
        file or its callers wrap in `nn.DataParallel`: its replica threads enter autocast again with the enabled
        flag only, so they run float16 whatever dtype is asked, and bfloat16 without a scaler would train them
        in float16 unscaled.
        `nn.BCELoss` / `F.binary_cross_entropy`, which CUDA autocast refuses ("unsafe to
        autocast"), stay outside the region with their inputs cast to float32; inside a function
        of the file the step calls (one that calls it, builds a BCELoss, or calls a BCELoss
        instance bound at module level or another such function), no fix. No fix when the
        project's torch floor lacks a symbol the fix would write (`torch.autocast` 1.10,
        `torch.amp.GradScaler` and `including_emulation=` 2.3, `ShardedGradScaler(device)` 2.1;
        see docs/fix-safety.md) or the code runs only on a torch older than one (it asserts
        torch 1.x, imports `torch._six`, fills with uint8 masks, or reads `loss.data[0]` of a
        loss it calls `.backward()` on: no `torch.amp.GradScaler` there), when the step is too
        irregular for one scaler path (several backward calls or optimizers, gradients clipped
        on every micro-step but stepped on a boundary), or when fused SGD with momentum, which
        a skipped scaled step corrupts, is built in the file or a module of the project around
        it. The finding's note says which.

        Not reported in test files (`lint-tests`), in a file that imports another deep-learning
        framework (PaddlePaddle, TensorFlow, OneFlow, ...) and torch nowhere, when mixed
        precision is done another way in the file, its callers or the modules either imports
        (a GradScaler, FSDP `MixedPrecision`/`MixedPrecisionPolicy`, a model cast or loaded in 16 bits
        (`from_pretrained(..., torch_dtype=torch.bfloat16)`, OpenAI CLIP's `clip.load`
        on a GPU), layers computing in
        their input's dtype, apex, DeepSpeed), when the file uses autocast in a way gpulint
        cannot link to the step, when a framework (Lightning, Accelerate, Fabric, DeepSpeed)
        owns the loop, in a function handed the loss (a loss scaler's `__call__`), in
        reinforcement-learning loops (the file imports an environment package, at module level or
        inside a function), with sparse tensors (made in the file or in a module it imports), which
        autocast does not cover, where a model's `forward` writes a submodule's 16-bit output into a
        float32 buffer through a mask (index_put raises on mismatched dtypes), by default where
        the model may run the project's own native kernels (built with `torch.utils.cpp_extension`), or in a
        learning-rate range test (a loop that raises the rate geometrically, records it and stops when
        the loss diverges: a few seconds of training, whose loss curve 16-bit compute would change), or
        where the loss (in the file or a module it imports) clamps probabilities to `1 - eps` before
        `log(1 - p)` with an eps 16 bits round away (a focal loss's `1.0 - 1e-4`: NaN under autocast).
        One finding per training step.
        """,
        premises=(TORCH_CODE, ON_GPU, FP32, TRAINS_A_MODEL, WIDE_ENOUGH, ENOUGH_WORK, AUTOCAST_EXISTS,
                  GPU_BOUND, AUTOCAST_COVERS, LOSS_FITS_16_BIT, OFF_ENVIRONMENT, LONG_RUN, RUNS, NOT_BENCHMARK),
        fix_cases=(
            FixCase('fp32 training step, `amp-dtype = "auto"` (the default): the dtype chosen once at run time '
                    "(bfloat16 where the GPU computes in it natively, else float16), a GradScaler enabled on the "
                    "float16 path only, `unscale_` before clipping",
                    Applicability.UNSAFE, "for_loop_clip_grad_norm.py"),
            FixCase('`amp-dtype = "float16"`: float16 and a GradScaler that is always on',
                    Applicability.UNSAFE, "amp_dtype_float16_writes_a_plain_scaler.py"),
            FixCase('`amp-dtype = "bfloat16"`: autocast only, no scaler',
                    Applicability.UNSAFE, "bf16_config_no_scaler.py"),
            FixCase("device: chosen at run time on two branches and passed to `train()`: the scaler and autocast use "
                    'the script\'s own device type, never a hard-coded `"cuda"`',
                    Applicability.UNSAFE, "device_chosen_on_two_branches.py"),
            FixCase("device: no tensor moved to a named device: the model's (`next(model.parameters()).device.type`)",
                    Applicability.UNSAFE, "model_device_when_no_device_is_visible.py"),
            FixCase("device: neither visible, bfloat16 (no scaler before the loop): the batch's (`x.device.type`)",
                    Applicability.UNSAFE, "batch_device_with_bfloat16.py"),
            FixCase('numerics: `1e-15` (flushes to zero in float16) in the loss, `amp-dtype = "auto"`: bfloat16, no '
                    "scaler",
                    Applicability.UNSAFE, "tiny_constant_gets_bfloat16.py"),
            FixCase("numerics: a `-1e9` mask (past float16's 65504) in a `forward` of the file: bfloat16, no scaler",
                    Applicability.UNSAFE, "large_mask_value_in_forward_gets_bfloat16.py"),
            FixCase('numerics: such a constant with `amp-dtype = "float16"`',
                    None, "tiny_constant_no_float16_fix.py"),
            FixCase("numerics: the output handed to a metric that reads it with `.numpy()` (numpy has no bfloat16): "
                    "float16 and a GradScaler that is always on",
                    Applicability.UNSAFE, "metric_read_as_numpy_gets_float16.py"),
            FixCase("numerics: the metric casts to float32 before `.numpy()`: the run-time choice stays",
                    Applicability.UNSAFE, "metric_read_after_a_cast_keeps_auto.py"),
            FixCase('numerics: the output read with `.numpy()`, `amp-dtype = "bfloat16"`',
                    None, "metric_read_as_numpy_no_bfloat16_fix.py"),
            FixCase("numerics: a gradient of the region handed to `np.percentile`: float16 and a GradScaler that is "
                    "always on",
                    Applicability.UNSAFE, "percentile_of_a_gradient_gets_float16.py"),
            FixCase("numerics: the gradient cast to float32 before `np.percentile`: the run-time choice stays",
                    Applicability.UNSAFE, "percentile_of_a_cast_gradient_gets_auto.py"),
            FixCase("numerics: the model's `forward` reads a feature it computes with `.numpy()`: float16 and a "
                    "GradScaler that is always on",
                    Applicability.UNSAFE, "forward_reads_numpy_gets_float16.py"),
            FixCase("numerics: the `forward` casts the feature to float32 before `.numpy()`: the run-time choice stays",
                    Applicability.UNSAFE, "forward_casts_before_numpy_gets_auto.py"),
            FixCase("numerics: the model is wrapped in `nn.DataParallel`, whose replicas run autocast's default "
                    "float16: float16 and a GradScaler that is always on",
                    Applicability.UNSAFE, "data_parallel_gets_float16.py"),
            FixCase('numerics: `nn.DataParallel` with `amp-dtype = "bfloat16"`',
                    None, "data_parallel_no_bfloat16_fix.py"),
            FixCase("numerics: the file builds an `nn.LSTM`, `nn.GRU` or `nn.RNN`, which CUDA autocast runs in "
                    "float16 whatever dtype is asked: float16 and a GradScaler that is always on",
                    Applicability.UNSAFE, "cudnn_rnn_gets_float16.py"),
            FixCase('numerics: a cuDNN RNN with `amp-dtype = "bfloat16"`',
                    None, "cudnn_rnn_no_bfloat16_fix.py"),
            FixCase("FSDP with a fused optimizer (a ShardedGradScaler would skip the cross-rank inf check): bfloat16,"
                    " no scaler and no scaler import",
                    Applicability.UNSAFE, "fsdp_fused_optimizer_gets_bfloat16.py"),
            FixCase("the optimizer is a module global: the scaler is created beside it, once",
                    Applicability.UNSAFE, "gradient_accumulation.py"),
            FixCase("`train()` receives the optimizer from a function of the file: the scaler is created there, "
                    "passed in (`scaler=None` fallback), saved and loaded with the optimizer's state",
                    Applicability.UNSAFE, "scaler_created_where_the_optimizer_is.py"),
            FixCase("`nn.BCELoss` / `F.binary_cross_entropy` on the loss line: kept outside autocast, inputs cast to "
                    "float32",
                    Applicability.UNSAFE, "bce_loss_kept_in_float32.py"),
            FixCase("binary_cross_entropy inside a helper of the step (CUDA autocast refuses it)",
                    None, "bce_in_helper_reported_without_fix.py"),
            FixCase("a BCELoss instance bound at module level, called inside helpers of the step (CUDA autocast "
                    "refuses it)", None, "bce_instance_in_helper_reported_without_fix.py"),
            FixCase("a loss handed in (`criterion(out, y)`, a parameter) where a loss class of the project computes "
                    "binary_cross_entropy", None, "bce_loss_class_handed_in_reported_without_fix.py"),
            FixCase("FSDP-sharded parameters: ShardedGradScaler instead of GradScaler",
                    Applicability.UNSAFE, "fsdp_uses_sharded_grad_scaler.py"),
            FixCase("tensor-parallel (DTensor) parameters: bfloat16, no scaler",
                    Applicability.UNSAFE, "tensor_parallel_uses_bfloat16.py"),
            FixCase("model and optimizer built inside the loop: the region starts after them",
                    Applicability.UNSAFE, "constructors_outside_the_autocast_region.py"),
            FixCase("the forward pass calls a module the instance holds (`self.G(x)`), its outputs read by several "
                    "loss lines: the region starts at that call, not at the loss sum",
                    Applicability.UNSAFE, "held_module_forward_in_the_autocast_region.py"),
            FixCase("the batch is fetched inside the region (`state, target = replay_buffer.sample()`): the device "
                    "is never read from a name the region assigns",
                    Applicability.UNSAFE, "held_module_batch_sampled_in_the_region.py"),
            FixCase("waiting on futures between forward statements",
                    None, "waiting_on_futures_reported_without_fix.py"),
            FixCase("the loss computed inside the `backward()` call",
                    None, "inline_loss_reported_without_fix.py"),
            FixCase("several backward calls or optimizers in one step (float16 needs one scaler path)",
                    None, "two_optimizers_reported_without_fix.py"),
            FixCase("the optimizer stepped is a wrapper, not a torch optimizer (a class of the file without "
                    "`param_groups`, or called with a method torch optimizers lack): no GradScaler can step it",
                    None, "optimizer_wrapper_reported_without_fix.py"),
            FixCase("the device never comes from a module without weights (a loss, an activation): "
                    "`next(criterion.parameters())` would raise StopIteration",
                    Applicability.UNSAFE, "weightless_criterion_not_the_device.py"),
            FixCase("gradients clipped on every micro-step but stepped on a boundary",
                    None, "clip_every_micro_step_reported_without_fix.py"),
            FixCase("floor: `torch-version` below 2.3 (no `torch.amp.GradScaler`, no `including_emulation=`) with "
                    '`"auto"` or `"float16"`',
                    None, "old_torch_version_no_fp16_fix.py"),
        ),
    )

    def detect(self, ctx: AstContext) -> None:
        facts = ctx.analysis(amp_regions)
        if facts.framework_owned or not facts.steps:
            return
        project = ctx.project
        bound = REFUTED if project.rl else SHOWN
        index_put = project.own.forward_index_puts_float32 or project.index_put_importees
        covers = REFUTED if project.own.sparse or project.sparse_importees or index_put else (
            UNDECIDED if project.own.native_kernels or project.native_importees else SHOWN)
        loss_fits = REFUTED if project.own.log_clamp_rounds_to_one or project.log_clamp_importees else SHOWN
        floor = ctx.settings.torch_version
        ceiling = project.torch_ceiling  # the first torch the code cannot run on
        if covers is SHOWN and _legacy(floor, ceiling) and _scripts_a_module(ctx):
            covers = REFUTED  # TorchScript before 1.10 does not follow torch.cuda.amp.autocast
        autocast_exists = _autocast_exists(floor, ceiling)
        if autocast_exists is SHOWN and _legacy(floor, ceiling) and (
                project.own.forward_overflows_float16 or project.float16_overflow_importees):
            autocast_exists = REFUTED  # torch.cuda.amp below 1.10 is float16 only, and the model's fill overflows it
        on_gpu = cuda_evidence(project)
        # on an XPU alone, the fix's device type decides (LibCST, only once every other premise allows)
        xpu = on_gpu is REFUTED and "xpu" in project.devices and not project.gpu
        for step in facts.steps:
            backward = step.backwards[0]  # one finding per training step, at its first backward()
            fp32 = fp32_step(ctx, facts, step)
            if fp32 is None:
                continue
            wide, work = step_scale(ctx, step)
            evidence = {TORCH_CODE: torch_code(project), ON_GPU: SHOWN if xpu else on_gpu, FP32: fp32,
                        WIDE_ENOUGH: wide, ENOUGH_WORK: work,
                        TRAINS_A_MODEL: REFUTED if optimizes_inputs(ctx, step) else SHOWN,
                        AUTOCAST_EXISTS: autocast_exists, GPU_BOUND: bound, AUTOCAST_COVERS: covers,
                        LOSS_FITS_16_BIT: REFUTED if loss_fits is SHOWN and logs_one_minus_model_sigmoid(ctx, step)
                        else loss_fits, OFF_ENVIRONMENT: off_environment(ctx, backward.call),
                        LONG_RUN: step_run(ctx, step.node), RUNS: runs(ctx, backward.call),
                        NOT_BENCHMARK: benchmark_step(ctx, backward.call)}
            decision = self.decide(evidence)
            if not decision.report:
                continue
            if xpu:  # on an XPU alone, the fix's device type decides where the step runs: LibCST's
                found = _libcst_step(ctx, backward.call)
                evidence[ON_GPU] = _xpu_named(*found[:2]) if found is not None else UNDECIDED
                decision = self.decide(evidence)
                if not decision.report:
                    continue
            forecast = autocast_fix(ctx, facts, step, backward, ctx.settings.value(AMP_DTYPE),
                                    partial(_device_is_xpu, ctx, backward.call))
            ctx.report(self, backward.call, _message(floor, ceiling), fix=forecast.applicability,
                       fix_message=forecast.message, note=forecast.note, decision=decision, data=forecast.decisions)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.analysis.training import training_step_of

        assert isinstance(node, cst.Call) and detection.data is not None
        found = training_step_of(fctx, node)
        if found is None:
            return None
        return self._build(fctx, *found, mode=detection.data["mode"], bce=detection.data["bce"],
                           message=detection.fix_message)

    @classmethod
    def may_report(cls, project: ProjectView, settings: Optional[Settings] = None) -> bool:
        return super().may_report(project, settings) and not _precision_handled(project)

    @staticmethod
    def _build(fctx: "FileContext", facts: "TrainingFacts", step: "TrainingStep", backward: "Backward", *,
               mode: str, bce: bool, message: str) -> Optional["PendingFix"]:
        """The rewrite on LibCST, which it edits, as analysis/amp_fix.py decided it on `ast` (`mode`: the
        dtype it writes; `bce`: binary_cross_entropy on the loss line stays outside autocast); None where
        LibCST reads the step differently (the engine reports that as a bug)."""
        from gpulint.core.names import NameUses
        from gpulint.core.pending import PendingFix
        from gpulint.rewrites.amp_device import cuda_device, default_device, device_type_code
        from gpulint.rewrites.amp_dtype import choice_code
        from gpulint.rewrites.amp_plan import (
            free_name,
            region_model_calls,
            scaler_anchor,
            scaler_home,
            scaler_name,
            scaler_plan,
            taken_names,
        )
        from gpulint.rewrites.mixed_precision import StepRewrite, grad_scaler_class, step_edits

        region, float_calls = _region_outside_autocast(facts, step, backward, bce)
        if region is None:
            return None
        anchor = scaler_anchor(facts, step.node)
        torch = fctx.imports.module_alias("torch")
        model_calls = region_model_calls(facts, region)
        device = device_type_code(facts, step, anchor, torch.expr, model_calls)
        if mode == "bfloat16" and device == fctx.style.string("cuda") and default_device(fctx) == "cuda":
            # no scaler to create before the loop: what the wrapped region sees will do (its device,
            # its model, the batch the model is called on)
            written = frozenset().union(*(NameUses.of(s).writes
                                          for s in region.container.body[region.start:region.end + 1]))
            device = device_type_code(facts, step, anchor, torch.expr, model_calls, inside_step=True,
                                      written=written, region=region.container.body[region.start])
        plan = None
        if mode != "bfloat16" and not backward.scaled:
            plan = scaler_plan(facts, step, backward)
            if plan is None:
                return None
        name = scaler_name(fctx)
        parallel = fctx.project.parallelism
        scaler_class, class_edit = grad_scaler_class(fctx, torch.expr, parallel) if plan is not None \
            else ("", None)
        choice: "Optional[Callable[[str, cst.CSTNode], str]]" = None
        choice_name = None
        dtype = f"{torch.expr}.{mode}"
        enabled = None
        if mode == "auto" and plan is not None:
            choice_name = free_name(taken_names(fctx), ("amp_dtype", "autocast_dtype"))
            quote = fctx.style.quote

            def choice(code: str, where: "cst.CSTNode") -> str:
                scope = facts.scope_of(where)
                cuda = code == f"{quote}cuda{quote}" or cuda_device(facts, (scope, facts.ctx.module), code)
                return choice_code(torch.expr, code, quote, cuda)

            dtype, enabled = choice_name, f"{choice_name} == {torch.expr}.float16"
        home = scaler_home(facts, step, plan, torch.expr, name) if plan is not None else None
        rewrite = StepRewrite(
            anchor=anchor, torch=torch.expr, device=device, region=region, dtype=dtype, choice=choice,
            choice_name=choice_name,
            scaler=plan, scaler_name=name, scaler_enabled=enabled, scaler_class=scaler_class, home=home,
            float_calls=float_calls,
        )
        return PendingFix.unsafe(message, torch.edit, class_edit, *step_edits(facts, rewrite))


def _autocast_exists(floor: Optional[tuple[int, ...]], ceiling: Optional[tuple[int, int]]) -> Evidence:
    """Refuted where no torch the code supports has mixed precision (`torch.cuda.amp`, 1.6); undecided where the
    code runs only on a torch older than `torch.autocast` (or on 1.10 alone) and no floor says `torch.cuda.amp`
    is there: unknown is not 1.6."""
    if (floor is not None and floor < CUDA_AMP_SINCE) or (ceiling is not None and ceiling <= CUDA_AMP_SINCE):
        return REFUTED
    if floor is None and ceiling is not None and ceiling <= (AUTOCAST_SINCE[0], AUTOCAST_SINCE[1] + 1):
        return UNDECIDED
    return SHOWN


def _scripts_a_module(ctx: AstContext) -> bool:
    """The file calls `torch.jit.script` (through any alias)."""
    return "script" in ctx.text and any(ctx.qualname(call.func) == "torch.jit.script"  # type: ignore[attr-defined]
                                        for call in ctx.nodes(ast.Call))


def _legacy(floor: Optional[tuple[int, ...]], ceiling: Optional[tuple[int, int]]) -> bool:
    """The project supports a torch without `torch.autocast` (below 1.10): `torch.cuda.amp`, float16 only."""
    return (floor is not None and floor < AUTOCAST_SINCE) or (ceiling is not None and ceiling <= AUTOCAST_SINCE)


def _message(floor: Optional[tuple[int, ...]], ceiling: Optional[tuple[int, int]]) -> str:
    """The advice in the spelling the project's torch has: `torch.cuda.amp` below 1.10."""
    return LEGACY_MESSAGE if _legacy(floor, ceiling) else MESSAGE


MESSAGE = "forward pass and loss run in fp32: wrap them in torch.autocast (up to 3x faster on tensor-core GPUs)"
# below torch 1.10, with GradScaler from torch.cuda.amp too (the note says so)
LEGACY_MESSAGE = MESSAGE.replace("torch.autocast", "torch.cuda.amp.autocast")


def _libcst_step(ctx: AstContext, call: ast.Call) -> "Optional[tuple[TrainingFacts, TrainingStep, Backward]]":
    """The step at `call` on LibCST (parsed here): None where LibCST cannot parse the file or reads it
    differently (tests/analysis/test_amp_steps.py pins the trees as equal)."""
    from gpulint.analysis.training import libcst_backward

    found = libcst_backward(ctx, call) if ctx.libcst() is not None else None
    return found if found is not None and found[1].backwards[0] is found[2] else None


def _xpu_named(facts: "TrainingFacts", step: "TrainingStep") -> Evidence:
    """ON_GPU on an XPU: shown only when the fix can use the script's own device type."""
    from gpulint.rewrites.amp_device import device_type_code
    from gpulint.rewrites.amp_plan import scaler_anchor

    anchor = scaler_anchor(facts, step.node)
    return SHOWN if device_type_code(facts, step, anchor) != '"cuda"' else REFUTED


def _device_is_xpu(ctx: AstContext, call: ast.Call, bce: bool) -> bool:
    """The fix spells the step's device type as the literal "xpu" (LibCST: how the fix names a device is
    read on the tree it edits). Asked only in a file that uses Intel GPUs and never names CUDA."""
    from gpulint.rewrites.amp_device import device_type_code
    from gpulint.rewrites.amp_plan import region_model_calls, scaler_anchor

    found = _libcst_step(ctx, call)
    if found is None:
        return False
    facts, step, backward = found
    fctx = facts.ctx
    region, _ = _region_outside_autocast(facts, step, backward, bce)
    model_calls = region_model_calls(facts, region) if region is not None else []
    torch = fctx.imports.module_alias("torch")
    device = device_type_code(facts, step, scaler_anchor(facts, step.node), torch.expr, model_calls)
    return device == fctx.style.string("xpu")


def _region_outside_autocast(facts: "TrainingFacts", step: "TrainingStep", backward: "Backward",
                             bce: bool) -> "tuple[Optional[Region], tuple[cst.Call, ...]]":
    """The LibCST region the fix wraps, and with `bce` (analysis/amp_fix.py decided binary_cross_entropy
    sits on the loss line) that line left out and its binary_cross_entropy calls, to compute in float32."""
    from gpulint.rewrites.amp_plan import Region, autocast_region, refused_calls

    region = autocast_region(facts, step, backward)
    if region is None or not bce:
        return region, ()
    calls = refused_calls(facts, region.container.body[region.end])
    if not calls or region.end == region.start:
        return None, ()
    return Region(region.container, region.start, region.end - 1), calls


def fp32_step(ctx: AstContext, facts: AmpRegions, step: AmpStep) -> Optional[Evidence]:
    """Whether the step's forward pass and loss run in fp32 (the FP32 premise; GPU401 asks the same); None
    when a helper is handed the loss, so the forward pass is a caller's."""
    project = ctx.project
    fp32 = REFUTED if facts.low_precision_model or sixteen_bit_elsewhere(project) else SHOWN
    for each in step.backwards:
        statement = facts.loss_statement(step, each)
        if facts.loss_passed_in(each):
            return None  # a helper handed the loss (a loss scaler's __call__): the forward pass is the caller's
        coverage = facts.coverage(statement).coverage
        if coverage is Coverage.COVERED:
            fp32 = REFUTED
        elif coverage is Coverage.UNKNOWN and fp32 is SHOWN:
            fp32 = UNDECIDED
    if fp32 is SHOWN and "grad-scaler" in project.mixed_precision and SIXTEEN_BIT.search(ctx.text):
        fp32 = UNDECIDED  # a scaler and a 16-bit dtype named here: the model may compute in it (nanochat)
    return fp32


def step_scale(ctx: AstContext, step: AmpStep) -> tuple[Evidence, Evidence]:
    """The WIDE_ENOUGH and ENOUGH_WORK premises: whether tensor cores can matter for the model the step trains
    (GPU401 asks the same for TF32)."""
    kinds: set[str] = set()
    width = trained_model_width(ctx, step, kinds)
    wide = REFUTED if width is not None and width < ctx.settings.value(MIN_WIDTH) else SHOWN
    rows = ctx.project.own.step_rows
    images = ctx.project.own.image_rows
    if rows is None and images is not None and width is not None:
        batch, side = images
        # an MLP multiplies at most a row per sample and image line; any other layer a row per pixel
        rows = batch * side if kinds and kinds <= _LINEAR_LAYERS else batch * side * side
    work = REFUTED if width is not None and rows is not None and rows * width * width < STEP_WORK_FLOOR else SHOWN
    return wide, work


def sixteen_bit_elsewhere(project: ProjectView) -> bool:
    """16-bit compute done another way in or around the file: autocast in a caller or in the model's own
    module, FSDP MixedPrecision(Policy), a model cast or loaded in 16 bits, layers that compute in their
    input's dtype, apex, DeepSpeed. A GradScaler alone is not 16-bit compute."""
    return bool(set(project.mixed_precision) - {"grad-scaler"})


def _precision_handled(project: ProjectView) -> bool:
    """Refuted before parsing: 16-bit training done another way, a loop bound by its environment, or another
    framework's code (TORCH_CODE)."""
    if other_framework(project):
        return True  # paddle.amp.auto_cast is not torch.autocast, nor its step torch's
    if project.rl:
        return True  # the step waits on a simulator; small policy nets gain nothing (AMP recipe)
    if project.own.sparse or project.sparse_importees:
        return True  # sparse kernels are outside autocast: mixing them with 16-bit activations fails
    return sixteen_bit_elsewhere(project)
