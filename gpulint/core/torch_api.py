"""Torch's API as the rules read it: qualified names, argument positions (issue 25: knowledge in one place).

Version floors stay in core/floors.py (what a fix may write for a project's torch); this module says
what torch calls things and where an argument sits when it is passed by position. Sections are per
subject; others append theirs below, each headed with a comment.
"""

from __future__ import annotations

from gpulint.project import checkpoint_getters, facts

# ------------------------------------------------------------------------------------------------
# optimizers (GPU201)
# ------------------------------------------------------------------------------------------------

# the optimizers with a fused kernel, by class name (the floor of each: core/floors.py `fused(name)`)
FUSED_CAPABLE = ("Adam", "AdamW", "SGD", "Adagrad")
# qualified name -> class name, through the public module and the one that defines the class
OPTIMIZER_CLASSES: dict[str, str] = {
    **{f"torch.optim.{name}": name for name in FUSED_CAPABLE},
    "torch.optim.adam.Adam": "Adam",
    "torch.optim.adamw.AdamW": "AdamW",
    "torch.optim.sgd.SGD": "SGD",
    "torch.optim.adagrad.Adagrad": "Adagrad",
}
OPTIMIZER_PARAMS = ("params", 0)  # every torch optimizer: (params, ...)
SGD_MOMENTUM = ("momentum", 2)  # SGD(params, lr, momentum, dampening, weight_decay, nesterov)
SGD_WEIGHT_DECAY = ("weight_decay", 4)

# ------------------------------------------------------------------------------------------------
# data loading (GPU101, GPU102; analysis/loaders.py)
# ------------------------------------------------------------------------------------------------

DATALOADER = facts.DATALOADER  # the one list, kept with the project facts (the layer below)
# the rules about DataLoader calls can only fire where the text says DataLoader and the tree resolves one
DATALOADER_NEEDLES = ("DataLoader",)
DATALOADER_AST_NEEDLES = (tuple(sorted(DATALOADER)),)
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
DATALOADER_DATASET = ("dataset", 0)
DATALOADER_NUM_WORKERS = ("num_workers", 5)
DATALOADER_PIN_MEMORY = ("pin_memory", 7)
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
# torch wrappers whose items are their first argument's items
DATASET_WRAPPERS = frozenset({
    "torch.utils.data.Subset", "torch.utils.data.dataset.Subset",
    "torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset",
})
DATASET_SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})
# tensor methods that only reshape (a view of a pinned batch is pinned; a copy they make is pageable, and a
# non-blocking copy from pageable memory is merely synchronous): `images.reshape(-1, 784).to(device)` copies the
# batch itself, so GPU101's fix makes it non-blocking
SHAPE_METHODS = frozenset({
    "reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t", "contiguous",
    "view_as", "reshape_as",
})

# ------------------------------------------------------------------------------------------------
# training steps, syncs, debug APIs, grad mode (GPU501-GPU505; analysis/steps.py) — r27-steps
# ------------------------------------------------------------------------------------------------
CUDA_SYNCHRONIZE = frozenset({"torch.cuda.synchronize"})
EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"})
DATA_PARALLEL = facts.DATA_PARALLEL  # the one list, kept with the project facts (the layer below)
SET_DETECT_ANOMALY = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})
SET_DETECT_ANOMALY_MODE = ("mode", 0)  # set_detect_anomaly(mode, check_nan=True)
DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
AUTOGRAD_PROFILERS = frozenset({"torch.autograd.profiler.profile", "torch.autograd.profiler.emit_nvtx",
                                "torch.autograd.profile", "torch.autograd.emit_nvtx"})
PROFILER_ENABLED = ("enabled", 0)  # profile(enabled=True, *, ...), emit_nvtx(enabled=True, record_shapes=False)
# torch.nn.Module as its subclasses spell it, and the containers a deep stack of blocks is built with (GPU301)
NN_MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module"})
# Lightning's module class under each of its package names: Lightning runs the loop of its subclasses, and calls
# their `configure_optimizers` after moving them to their device (`Strategy.setup`: model_to_device, then
# setup_optimizers)
LIGHTNING_MODULES = frozenset({"lightning.LightningModule", "lightning.pytorch.LightningModule",
                               "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
                               "lightning.pytorch.core.LightningModule"})
SEQUENTIAL = "Sequential"
MODULE_LIST = "ModuleList"
# contexts and decorators that turn autograd off
GRAD_OFF = facts.GRAD_OFF  # the one list, kept with the project facts (the layer below)
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                              "torch.autograd.grad_mode.set_grad_enabled"})
SET_GRAD_ENABLED_MODE = ("mode", 0)
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
AUTOGRAD_BACKWARD = "torch.autograd.backward"

# ------------------------------------------------------------------------------------------------
# r26-data: GradScaler steps (GPU202), tensor factories (GPU105), loader loops (GPU103/GPU104)
# ------------------------------------------------------------------------------------------------

SGD = frozenset(name for name, cls in OPTIMIZER_CLASSES.items() if cls == "SGD")
# torch's own GradScaler classes, from the one list the project facts keep (project/facts.py sits below
# this layer), without the third-party loss scalers that wrap one (timm's NativeScaler has no .step(opt))
GRAD_SCALERS = frozenset(name for name in facts.GRAD_SCALERS if name.startswith("torch."))
# GradScaler(device="cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled);
# torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled)
GRAD_SCALER_ENABLED_POSITION = {"new": 5, "cuda": 4}
DATALOADER_COLLATE_FN = ("collate_fn", 6)

# factories whose values do not depend on a random stream: `device=` makes the same tensor on the device
# (not `torch.tensor(data)`: with `device=` it still builds the data on the host and copies it over)
DETERMINISTIC_FACTORIES = frozenset(f"torch.{name}" for name in (
    "zeros", "ones", "full", "empty", "arange", "eye",
    "zeros_like", "ones_like", "full_like", "empty_like",
))
# factories that draw from the generator of the device they run on: CPU and CUDA streams differ
RANDOM_FACTORIES = frozenset(f"torch.{name}" for name in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
))

# ------------------------------------------------------------------------------------------------
# attention (GPU403; analysis/attention.py)
# ------------------------------------------------------------------------------------------------

SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.modules.activation.Softmax"})
SOFTMAX_DIM = ("dim", 1)  # F.softmax(input, dim, ...); Tensor.softmax(dim) and nn.Softmax(dim) take it first
MATMUL_FUNCTIONS = frozenset({"torch.matmul"})
BMM_FUNCTIONS = frozenset({"torch.bmm"})  # 3-D only: (B*H, T, D), a layout SDPA takes as it is
EINSUM_FUNCTIONS = frozenset({"torch.einsum", "torch.functional.einsum"})
DROPOUT_FUNCTIONS = frozenset({"torch.nn.functional.dropout"})
DROPOUT_MODULES = frozenset({"torch.nn.Dropout", "torch.nn.modules.dropout.Dropout"})
# F.dropout(input, p=0.5, training=True, inplace=False)
DROPOUT_P, DROPOUT_TRAINING, DROPOUT_INPLACE = ("p", 1), ("training", 2), ("inplace", 3)
TRANSPOSE_FUNCTIONS = frozenset({"torch.transpose"})
TRIL_FUNCTIONS = frozenset({"torch.tril"})
ONES_FUNCTIONS = frozenset({"torch.ones", "torch.ones_like"})
FINFO = frozenset({"torch.finfo"})
SDPA_MODULE, SDPA_NAME = "torch.nn.functional", "scaled_dot_product_attention"
SDPA_FUNCTIONS = frozenset({f"{SDPA_MODULE}.{SDPA_NAME}", "torch._C._nn.scaled_dot_product_attention"})
# packages whose every attention function is a fused kernel (`xformers.ops.memory_efficient_attention`,
# `flash_attn.flash_attn_func`): a call into one is a fused path
FUSED_ATTENTION_PACKAGES = ("xformers", "flash_attn")

# ------------------------------------------------------------------------------------------------
# image augmentation (GPU106; analysis/augmentation.py): torchvision and albumentations, not torch
# ------------------------------------------------------------------------------------------------

TORCHVISION_TRANSFORMS = (
    "torchvision.transforms.", "torchvision.transforms.v2.", "torchvision.transforms.transforms.",
    "torchvision.transforms.v2._color.", "torchvision.transforms.v2._geometry.",
    "torchvision.transforms.v2._auto_augment.", "torchvision.transforms.autoaugment.",
)
COMPOSE = frozenset({"torchvision.transforms.Compose", "torchvision.transforms.v2.Compose",
                     "torchvision.transforms.transforms.Compose", "albumentations.Compose",
                     "albumentations.core.composition.Compose"})
# ops that cost about a JPEG decode or more per image on CPU (bench/augmentation_cpu_cost.py)
HEAVY_TORCHVISION = frozenset({"ColorJitter", "GaussianBlur", "AugMix", "ElasticTransform", "RandomPerspective",
                               "RandAugment"})
HEAVY_ALBUMENTATIONS = frozenset({"ElasticTransform", "GridDistortion", "OpticalDistortion"})

# ------------------------------------------------------------------------------------------------
# spelling torch objects in fixes (core/pending.py ImportPlanner, analysis/ast_context.py AstNames)
# ------------------------------------------------------------------------------------------------

# submodules that `import torch` makes reachable as attributes (checked on torch 2.4-2.14)
REACHABLE_FROM_TORCH = (
    "torch.amp", "torch.autograd", "torch.cuda", "torch.nn", "torch.optim",
    "torch.utils.data", "torch.utils.checkpoint", "torch.distributed",
)

# ------------------------------------------------------------------------------------------------
# activation checkpointing (GPU301, GPU302)
# ------------------------------------------------------------------------------------------------

CHECKPOINT = checkpoint_getters.CHECKPOINT  # the one name, kept with the project facts (the layer below)
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
CHECKPOINT_FUNCTIONS = frozenset({CHECKPOINT, CHECKPOINT_SEQUENTIAL})
# checkpoint_sequential(functions, segments, input, use_reentrant, ...): a fourth positional sets it
CHECKPOINT_SEQUENTIAL_USE_REENTRANT = ("use_reentrant", 3)

# layer-wise adaptive rate wrappers around an optimizer (apex's LARC, torchlars' LARS): their `step()` walks the
# parameters in Python (two norms per tensor, and in apex a host-syncing test per tensor) before the inner step,
# so that loop, not the inner optimizer's kernels, is the step's cost (GPU201). A class of the project's own of
# that name is not among them: its step is not known.
ADAPTIVE_RATE_WRAPPERS = frozenset({
    "apex.parallel.LARC.LARC", "apex.parallel.LARC", "torchlars.LARS", "torchlars.lars.LARS",
})

# ------------------------------------------------------------------------------------------------
# modules, dtypes and devices (GPU001's fix, GPU201's built-on-device)
# ------------------------------------------------------------------------------------------------

# the recurrent modules that run through cuDNN on CUDA; its autocast wrapper casts them to float16
CUDNN_RNNS = frozenset({f"torch.nn.{name}" for name in ("LSTM", "GRU", "RNN")}
                       | {f"torch.nn.modules.rnn.{name}" for name in ("LSTM", "GRU", "RNN")})
# torch's dtype names (`torch.<name>`): `.to(<one of these>)` casts, it does not move
DTYPE_NAMES = frozenset({"float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "uint8",
                         "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "cfloat"})

# ------------------------------------------------------------------------------------------------
# frameworks that run the training loop (analysis/training.py, GPU201)
# ------------------------------------------------------------------------------------------------

# packages (and classes) that run the training loop and own precision themselves: a module-level import
FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "deepspeed", "mmengine",
              "transformers.Trainer", "transformers.trainer")

# how a script's text shows a model wrapped for data parallelism (the fixes that must come before the
# wrapping, GPU404's channels_last and GPU601's compile, are withheld there)
DATA_PARALLEL_WRAPPERS = ("DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "fully_shard",
                          "DDP(", "FSDP(")


def not_an_optimizer_name(name: str) -> bool:
    """`.step()` on a name like these steps something else: a scheduler, a learning rate, an environment, a
    GradScaler (its step is `scaler.step(opt)`)."""
    last = name.split(".")[-1].lower()
    return "sched" in last or last in ("lr", "env", "scaler") or "scaler" in last


def optimizer_name(name: str) -> bool:
    """A dotted name spelled as an optimizer (`optimizer`, `opt_g`, `self.optim`), or an attribute of a
    container of optimizers (stargan-v2's `optims.discriminator`, `self.optimizers.gen`). Every step finder
    reads it (analysis/amp_steps.py and analysis/steps.py on `ast`, analysis/training.py on LibCST)."""
    parts = name.lower().split(".")
    last = parts[-1]
    if "optim" in last or last in ("opt", "optimiser") or last.startswith("opt_") or last.endswith("_opt"):
        return True
    return len(parts) > 1 and "optim" in parts[-2]
