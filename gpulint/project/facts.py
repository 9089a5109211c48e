"""Per-file facts for the project model, read from CPython's `ast` tree (cheap, cached by content).

A rule looking at one file often needs facts from the files around it: the GradScaler lives
in `train.py` while the optimizer is built in `utils/torch_utils.py`; the device is chosen in
`main.py` and the step runs in `train.py`; the dataset class a DataLoader reads is defined in
`data.py`. This module reduces one file to the handful of facts other files may ask about.
Everything here is plain data (JSON round-trip) so it can be cached and sent to workers.

Names are resolved through the file's module-level imports only (no scopes): the facts are
evidence, and every consumer treats a missing fact as "not known", never as a finding.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import field, replace
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from gpulint.project.ast_nodes import all_nodes, children, fast_walk, own_nodes, spans_any, walk
from gpulint.project.checkpoint_getters import CHECKPOINT, ONLY_TORCH, checkpoint_getter
from gpulint.project.clamps import (
    BCE_NAMES,
    CLAMP_NAMES,
    FLOAT32_FACTORY_NAMES,
    LOG_NAMES,
    SIGMOID_NAMES,
    bce_losses,
    forward_feeds_function_16_bit,
    forward_index_puts_float32,
    forward_overflows_float16,
    forward_reads_numpy,
    forward_returns_sigmoid,
    log_clamp_rounds_to_one,
    log_one_minus_sigmoid,
    numpy_readers,
)
from gpulint.project.codec import decode_fields, encode_fields
from gpulint.project.cpp_std import conditional_imports, import_alternatives, pins_pre_cpp17
from gpulint.project.env_loops import ENV_METHODS, env_calls, env_named
from gpulint.project.graph_data import DATASET_CALLS, IMAGE_SET_CALLS, image_rows, step_rows
from gpulint.project.iter_next import LOADER, NEXT_CEILING, loader_functions, next_origins
from gpulint.project.layers import (
    DIMS,
    OPAQUE,
    Layer,
    class_layers,
    convnet_classes,
    parameter_tensors,
    quantum_simulator,
    weightless_class,
)
from gpulint.project.loader_flow import (
    AT,
    class_like,
    cuda_devices,
    cuda_returns,
    device_word,
    dotted,
    hands_results_to_a_class,
    member_moves,
    method_moves,
    move_kinds,
    moved_results,
    parameter_moves,
    self_device_copies,
    self_devices,
)
from gpulint.project.methods import (
    DYNAMIC_BUILTINS,
    DYNAMIC_CALLS,
    init_moves,
    mentions_name,
    plain_classes,
    uncalled_methods,
)
from gpulint.project.token_items import yields_token_ids
from gpulint.records import dataclass

FACTS_VERSION = 67

# names of model options that switch a fused attention kernel on (`flash=False`, `use_flash_attn`, `fused_attn`,
# `use_sdpa`, `xformers`, `mem_efficient`): the values files give them decide whether a hand-written fallback
# branch runs (GPU403); only options named so are recorded, which keeps the facts small
FUSED_OPTION = re.compile(r"flash|sdpa|fused_att|xformers|mem(?:ory)?_eff|scaled_dot", re.IGNORECASE)
# names of flags that switch activation checkpointing on (`gradient_checkpointing`, `use_checkpoint`,
# `grad_ckpt`): what files give them decides whether a checkpoint call behind one can run (GPU302)
CHECKPOINT_OPTION = re.compile(r"checkpoint|ckpt", re.IGNORECASE)
# Hugging Face's switch: `model.gradient_checkpointing_enable()` (Transformers) or
# `unet.enable_gradient_checkpointing()` (Diffusers) sets `gradient_checkpointing = True` on every submodule
# that has the attribute, so a call of either gives that option the value on
HF_CHECKPOINTING_ENABLE, HF_CHECKPOINTING_FLAG = "gradient_checkpointing_enable", "gradient_checkpointing"
# what a file gives such an option (FileFacts.option_values)
OPTION_ON, OPTION_OFF, OPTION_UNKNOWN = "on", "off", "unknown"
# FileFacts.class_calls: a call with `*args`, or `**kwargs` whose keys the file does not show
SPLAT = -1

DATASET_BASES = frozenset({
    "torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset",
    "torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset",
    "torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset",
})
ITERABLE_BASES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
GRAD_SCALERS = frozenset({
    "torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    "torch.distributed.fsdp.ShardedGradScaler",
    # timm's loss scaler: a torch GradScaler behind `loss_scaler(loss, optimizer, ...)` (DeiT, ConvNeXt, MAE)
    "timm.utils.NativeScaler", "timm.utils.cuda.NativeScaler",
})
SHARDED_GRAD_SCALERS = frozenset({
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler", "torch.distributed.fsdp.ShardedGradScaler"})
AUTOCASTS = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast",
})
# FSDP's own mixed-precision policies: the sharded parameters already compute in 16 bits
FSDP_MIXED_PRECISION = frozenset({
    "torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
    "torch.distributed.fsdp.api.MixedPrecision",
    "torch.distributed.fsdp.MixedPrecisionPolicy", "torch.distributed._composable.fsdp.MixedPrecisionPolicy",
    "torch.distributed.fsdp._fully_shard.MixedPrecisionPolicy",
})
# torch's DataLoader, as the public module and the one that defines it name it (core/torch_api.py reads it here)
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# packages whose classes are not a project's own (a loader handed to `DataLoader(...)` or `nn.Module`s is not
# kept by a trainer class of the project: loader_flow.HAND)
LIBRARY_ROOTS = frozenset({"torch", "torchvision", "torchaudio", "torchtext", "numpy", "transformers", "datasets",
                           "accelerate", "lightning", "pytorch_lightning", "timm", "tqdm", "PIL", "sklearn"})
# modules (or names imported from a module) that torch, or the companion library released with it, removed, and
# the first torch release without them: a project that imports one unconditionally runs only on an older torch,
# so advice about what a newer torch does or warns about cannot pay off there. A key also covers what lies under
# it (`torchtext.legacy` covers `torchtext.legacy.data.Field`). From the releases, not read from wheels:
# - torch._six: removed in torch 2.0 (pytorch#94709).
# - torch.utils.ffi: the C FFI of torch 0.4; torch 1.0 replaced it with cpp_extension, its module only raising
#   ImportError (faster-rcnn.pytorch's compiled ROI and NMS layers import it).
# - torch._utils._accumulate: removed in torch 2.3 (pyro-ppl/pyro#3364 and deep-text-recognition-benchmark#416
#   report the ImportError on 2.3.0); older `random_split` copies import it.
# - torchtext.legacy: torchtext 0.9 to 0.11 only; 0.12, released with torch 1.11 (each torchtext pins its torch:
#   0.11 with 1.10, 0.12 with 1.11), removed it (pytorch/text#1437).
# - torchtext's first data API: torchtext 0.9, released with torch 1.8, moved these names of torchtext.data and
#   torchtext.datasets (and their modules) to torchtext.legacy. torchtext.data itself stays, with other contents
#   (get_tokenizer, bleu_score, utils, metrics, functional): only these names count. None came back; Multi30k,
#   IMDB, UDPOS, WikiText2 and the other datasets kept their names under the new API and are no ceiling.
# - torchtext itself: its last release, 0.18 (April 2024), pairs with torch 2.3 (it requires torch 2.3.0, and its
#   compiled extension loads on no later torch); development stopped, so no torchtext exists for torch 2.4 or
#   later, and any torchtext import caps torch at 2.3. The entries above, under it, are lower and win.
_TORCHTEXT_0_9 = (1, 8)
FFI_MODULE = "torch.utils.ffi"
# a build script calling it builds the project's compiled ops for torch 0.4 (FileFacts.builds_ffi_extension)
FFI_CREATE_EXTENSION = f"{FFI_MODULE}.create_extension"
REMOVED_MODULES: dict[str, tuple[int, int]] = {
    "torch._six": (2, 0),
    # `from torch._six import container_abcs` fails from 1.9 on, which dropped it (use collections.abc); the
    # ImportError every fast-autoaugment/efficientnet copy of 2019-2020 met
    "torch._six.container_abcs": (1, 9),
    FFI_MODULE: (1, 0),
    "torch._utils._accumulate": (2, 3),
    "torchtext": (2, 4),
    "torchtext.legacy": (1, 11),
    **{f"torchtext.data.{name}": _TORCHTEXT_0_9 for name in (
        "Batch", "Dataset", "TabularDataset", "Example", "RawField", "Field", "ReversibleField", "SubwordField",
        "NestedField", "LabelField", "BucketIterator", "Iterator", "BPTTIterator", "Pipeline", "pool",
        "batch", "dataset", "example", "field", "iterator", "pipeline")},  # the last six: modules (`batch` too)
    **{f"torchtext.datasets.{name}": _TORCHTEXT_0_9 for name in (
        "TranslationDataset", "LanguageModelingDataset", "SequenceTaggingDataset", "TextClassificationDataset",
        "SNLI", "MultiNLI", "XNLI", "SST", "IWSLT", "WMT14", "TREC", "BABI20",
        "babi", "language_modeling", "nli", "sequence_tagging", "sst", "text_classification", "translation",
        "trec", "unsupervised_learning")},  # the last nine: the modules
}
HALF_DTYPES = frozenset({"torch.float16", "torch.half", "torch.bfloat16"})
# OpenAI CLIP's loader (`import clip`; the package's __init__ re-exports clip/clip.py): `clip.load(name, device)`
# returns a model whose weights build_model converted to float16, and casts it back with `.float()` only when
# the device is "cpu"; on CUDA the model computes in 16 bits unless the code calls `.float()` on it
CLIP_LOADERS = frozenset({"clip.load", "clip.clip.load"})
OPTIMIZER_CLASSES = frozenset({
    "torch.optim.Adam", "torch.optim.AdamW", "torch.optim.SGD", "torch.optim.Adagrad",
    "torch.optim.adam.Adam", "torch.optim.adamw.AdamW", "torch.optim.sgd.SGD", "torch.optim.adagrad.Adagrad",
})
# packages whose environments make a training loop wait on a simulator, not on the GPU
RL_PACKAGES = frozenset({
    "gym", "gymnasium", "envpool", "pettingzoo", "procgen", "isaacgym", "isaacgymenvs", "dm_control",
    "supersuit", "minigrid", "atari_py", "ale_py", "mujoco_py", "brax",
})
JAX_PACKAGES = frozenset({"jax", "flax", "optax"})
# deep-learning frameworks other than torch, by top-level package: a file that imports one of them and torch nowhere
# trains with that framework, whose `loss.backward()` and `optimizer.step()` read like torch's (PaddlePaddle,
# OneFlow) and whose own mixed precision (`paddle.amp.auto_cast`) gpulint does not read (analysis/frameworks.py)
OTHER_FRAMEWORKS = frozenset({"paddle", "tensorflow", "jax", "flax", "mindspore", "oneflow", "mxnet", "megengine"})
XLA_PACKAGES = frozenset({"torch_xla"})  # TPU training: CUDA-only advice (fused, pinned memory, AMP) does not apply
# sharded or tensor-parallel training: a plain GradScaler does not agree on inf/NaN across ranks
FSDP_WRAPPERS = frozenset({
    "torch.distributed.fsdp.FullyShardedDataParallel", "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
})
CHECKPOINTING_METHOD = "gradient_checkpointing_enable"  # Hugging Face's, unless a class of the project defines it
# single-process replicas (torch's parallel_apply re-enters autocast with its enabled flag only: float16)
DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                           "torch.nn.parallel.data_parallel.DataParallel"})
TENSOR_PARALLEL = frozenset({
    "torch.distributed.tensor.parallel.parallelize_module", "torch.distributed.tensor.distribute_tensor",
    "torch.distributed.tensor.distribute_module", "torch.distributed._tensor.distribute_tensor",
    "torch.distributed.tensor.parallel.api.parallelize_module",
})
# packages that replace a torch optimizer with their own implementation (MS-AMP's LBAdam)
OPTIMIZER_REPLACERS = frozenset({"msamp"})

# item kinds a Dataset class yields (see `dataset_kind`)
ON_DEVICE = "on-device"  # its tensors already live on a device: nothing to pin, workers would re-init CUDA
NOTHING = "nothing"  # per-item values that are not data (a prompt string, the index): nothing to pin or load
IN_MEMORY = "in-memory"  # indexes data held in memory, no per-item work: workers only add copies
WORK = "work"  # loads, decodes or transforms per item: workers and pinning pay off
UNKNOWN = "unknown"

# calls that neither load nor transform: an item built only with these is cheap
_LIGHT_FUNCTIONS = frozenset({
    "len", "int", "float", "str", "bool", "range", "isinstance", "min", "max", "abs", "dict", "list", "tuple",
    "zip", "enumerate", "super", "slice", "divmod", "round", "hasattr", "getattr", "sorted", "sum", "type",
})
_LIGHT_METHODS = frozenset({
    "get", "keys", "values", "items", "copy", "float", "long", "int", "half", "double", "bool", "clone",
    "view", "reshape", "squeeze", "unsqueeze", "permute", "contiguous", "flatten", "detach", "numpy",
    "tolist", "item", "size", "dim", "format", "append", "update", "index", "transpose", "t", "type",
    # elementwise and reduction tensor arithmetic: cheap next to a training step
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "pow", "clamp", "clip", "mean", "std",
    "sum", "max", "min", "argmax", "flip", "roll", "expand", "repeat", "narrow", "split", "chunk", "to",
    "masked_fill", "fill_", "zero_", "add_", "sub_", "mul_", "div_", "byte",
})
_LIGHT_TORCH = frozenset({
    "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.stack", "torch.cat", "torch.LongTensor",
    "torch.FloatTensor", "torch.Tensor", "torch.zeros", "torch.ones", "torch.full", "torch.arange",
    "torch.zeros_like", "torch.ones_like", "torch.empty", "numpy.array", "numpy.asarray",
    # synthetic data: drawing random numbers per item costs nothing a worker would save
    "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.normal",
})
_FACTORIES_ON_DEVICE = frozenset({
    "torch.tensor", "torch.as_tensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange",
    "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.linspace", "torch.eye", "torch.normal",
})


@dataclass(frozen=True)
class ClassFacts:
    """A top-level class: its bases, and for a Dataset what each item costs."""

    bases: tuple[str, ...]  # qualified through the imports where possible, else as written
    dataset: Optional[str] = None  # a kind above for Dataset subclasses, else None
    iterable: bool = False  # an IterableDataset
    sharded: bool = False  # mentions get_worker_info (an IterableDataset that splits work between workers)
    # constructor parameters whose values items carry as they were given (`self.emb = emb`, then
    # `item["emb"] = self.emb`), as "<position>:<name>" (position -1: keyword-only): their device is
    # the caller's, which this class does not show
    passed_arguments: tuple[str, ...] = ()
    bulk: bool = False  # items decode images, audio or arrays: batches big enough that pinning them pays
    # items are only token ids a tokenizer made (project/token_items.py): batches of a few KB, too small for
    # pinned memory to pay off
    token_ids: bool = False
    module: bool = False  # an nn.Module subclass (directly or through a class that may be one)
    # an nn.Module's layers as its __init__ builds them (project/layers.py); None: not read
    layers: Optional[tuple[Layer, ...]] = None
    init_params: tuple[str, ...] = ()  # __init__'s parameters, in order (self left out)
    init_defaults: tuple[tuple[str, int], ...] = ()  # their integer defaults
    # an item reads a file or decodes data (`reads_per_item`): the per-item cost workers take over even
    # where nothing trains (an inference script's loader)
    item_io: bool = False
    # constructor parameters defaulting to None whose callables (`self.T = t`, then `self.T(sample)`) are the only
    # per-item work the items do, as "<position>:<name>" (position -1: keyword-only); a call that passes none of
    # them (or None) builds a dataset whose items cost `plain` (IN_MEMORY or NOTHING), and decode nothing unless
    # `plain_bulk` (adarnn's weather `data_loader(feat, label, label_reg)`, blind23)
    optional_work: tuple[str, ...] = ()
    plain: str = ""
    plain_bulk: bool = False
    # an nn.Module whose `__init__` builds one or two Linear layers and nothing else with a matmul (norms,
    # pooling, dropout, reshapes aside), in straight-line code over nn.Module itself (`_few_tensors`): a
    # logistic-regression head, whose parameters are a handful of tensors
    head: bool = False
    # the parameter tensors an nn.Module over nn.Module itself visibly builds in `__init__` (and the helpers it
    # calls once), not counting the project classes it builds (its MODULE layers); None: not read in full
    # (project/layers.py `parameter_tensors`): GPU201's few-tensor models
    tensors: Optional[int] = None
    # a 2-D/3-D convnet whose Linear layers are only a head (project/layers.py `convnet_classes`): its
    # matmuls are a small share of its work, and its convolutions already run in TF32 (GPU401)
    convnet: bool = False
    # an nn.Module over nn.Module alone that holds no weight (project/layers.py `weightless_class`: only methods,
    # a forward and no __init__; or an __init__ without parameters that builds no layer and no nn.Parameter):
    # `weightless_module`
    weightless: bool = False
    # an nn.Module whose `forward` returns a sigmoid on every `return` (project/clamps.py `forward_returns_sigmoid`):
    # a caller's `log(1 - p)` of what it returns is -inf (or flat) under 16-bit autocast (GPU001's loss-fits-16-bit)
    sigmoid_output: bool = False

@dataclass(frozen=True)
class ImportRef:
    """One module-level binding made by an import: `local` names `name` of `module` (or the module)."""

    local: str
    module: str  # as written, without the leading dots of a relative import
    level: int  # dots of a relative import
    name: Optional[str]  # None: the module itself (`import a.b as c`); "*" for a star import


@dataclass(frozen=True)
class FileFacts:
    imports: tuple[ImportRef, ...] = ()
    gpu: bool = False  # GPU evidence (a cuda/nccl string, torch.cuda, .cuda(), device_ids=, LOCAL_RANK, ...)
    # pins a device to "cpu" somewhere (device="cpu", torch.device("cpu"), .to("cpu")), or hides every GPU
    # (`os.environ["CUDA_VISIBLE_DEVICES"] = ""`)
    cpu_pinned: bool = False
    scaler: bool = False  # creates a GradScaler (any kind) or scales a loss through one
    # creates or imports FSDP's ShardedGradScaler (dinov2's fsdp/__init__.py imports it for ssl_meta_arch.py)
    sharded_scaler: bool = False
    mixed_precision: tuple[str, ...] = ()  # evidence of 16-bit training done some way (kinds, sorted)
    training: bool = False  # calls .backward() and steps something
    rl: bool = False  # imports a reinforcement-learning environment package (anywhere, in functions too)
    # the deep-learning framework other than torch (OTHER_FRAMEWORKS; the first by name) the file imports anywhere
    # (in functions too), when it imports torch nowhere; "" otherwise, also where it imports neither
    other_framework: str = ""
    sparse: bool = False  # makes sparse tensors (autocast does not cover sparse kernels)
    # a function clamps a value to `1 - eps` with eps <= 2**-9 and takes `log(1 - x)` of it, or takes
    # `log(1 - sigmoid(x))` with no clamp (project/clamps.py): under 16-bit autocast the bound, or the sigmoid
    # from a logit of 7 (bfloat16), rounds to 1.0 and the log is -inf (a focal loss's `1.0 - 1e-4`; caser's loss)
    log_clamp_rounds_to_one: bool = False
    # a `forward` of a class of the file holds a float literal float16 cannot hold (`masked_fill(mask, -1e9)`):
    # float16 autocast raises there (project/clamps.py)
    forward_overflows_float16: bool = False
    # a `forward` of a class of the file writes a submodule's output into a float32 buffer it made, through a mask
    # (`rgb[mask] = self.render(x)` after `rgb = torch.zeros(...)`): index_put raises under autocast (project/clamps.py)
    forward_index_puts_float32: bool = False
    # a `forward` of a class of the file hands a custom autograd Function (`Op.apply(value, ...)`) what one of its
    # own linear or convolution layers returned, reshaped at most: 16-bit under autocast, which `apply` does not
    # cast, so a float-only native kernel behind it raises (Deformable DETR's MSDeformAttn; project/clamps.py)
    forward_feeds_function_16_bit: bool = False
    # top-level functions that read a tensor they are handed with `.numpy()`, no cast on the way (project/clamps.py),
    # with the positions of the parameters read so: numpy has no bfloat16, so handed a model output computed under
    # bfloat16 autocast they raise
    numpy_readers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # a `forward` of a class of the file reads a value it computes with `.numpy()` or a numpy function, no cast on
    # the way (project/clamps.py): under bfloat16 autocast that value is bfloat16, which numpy cannot take
    forward_reads_numpy: bool = False
    # module-level classes and functions that compute binary_cross_entropy, which CUDA autocast refuses
    # (project/clamps.py; also by calling a BCELoss instance bound at module level, or another of them): a step
    # handed its loss as a parameter may be handed one of them, and a step calling one has no fix
    bce_losses: tuple[str, ...] = ()
    # builds native kernels at import or run time (torch.utils.cpp_extension.load / load_inline): the
    # project's own CUDA/C++ ops, which autocast does not cover and which may take only fp32/fp16
    native_kernels: bool = False
    # a top-level class defines its own `gradient_checkpointing_enable` (a project's LLaMA rewrite): a model that
    # module builds is not Hugging Face's, whose method takes `gradient_checkpointing_kwargs`
    checkpointing_method: bool = False
    # compiled extension modules the file builds (setup.py: `CUDAExtension("pkg._C", ...)`), by dotted name
    extensions: tuple[str, ...] = ()
    jax: bool = False  # imports jax / flax / optax
    replaces_optimizers: bool = False  # imports a package that swaps torch optimizers for its own
    # "fsdp", "tensor-parallel" (how parameters are sharded), "data-parallel" (nn.DataParallel replicas)
    parallelism: tuple[str, ...] = ()
    fused_sgd_momentum: bool = False  # builds SGD with fused=True and momentum (unsafe under a GradScaler)
    # dest -> literal default (a number, a string, a bool, None, or a list of ints: `nargs="+", default=[16, 16]`),
    # from `add_argument(..., default=...)` and `parser.set_defaults(dest=...)`; None where the two disagree
    argparse_defaults: dict[str, Any] = field(default_factory=dict)
    # argparse dests whose parsed value is a bool (`action="store_true"`/`"store_false"`, no default or a bool
    # one, declared no other way); none where the file may set options by computed name (a `setattr` with a
    # computed name, `set_defaults`, an update of or a store into `vars(args)` / `args.__dict__`)
    bool_flags: tuple[str, ...] = ()
    dataclass_ints: dict[str, dict[str, int]] = field(default_factory=dict)  # field -> {class: int default}
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    # top-level name -> the other top-level names its definition refers to (registries, factories)
    refs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # module-level names bound to torch optimizer classes, or to dicts whose values all are
    optimizers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    names: tuple[str, ...] = ()  # identifiers used, kept only for files that train (GPU301's "trained" test)
    # names N used as `N.__dict__[...]` (a module used as its own registry: `models_mae.__dict__[arch]`)
    dict_lookups: tuple[str, ...] = ()
    # top-level functions that build a dataset whose rows are computed up front (`.map(...)`, no
    # per-item transform): a loader over what they return does no per-item work
    row_functions: tuple[str, ...] = ()
    xla: bool = False  # imports torch_xla or Lightning's XLA accelerator/strategies: the device is a TPU
    # top-level functions that cast the parameters of the model they build or load to a dtype they are handed
    # (`_dtype_casts`): name -> (that parameter, its position; -1 keyword-only). Handed a 16-bit dtype, they
    # return a model that already computes in it (mistral-finetune's `load_model(..., param_dtype=)`, GPU001)
    dtype_casts: dict[str, tuple[str, int]] = field(default_factory=dict)
    # top-level functions of a module that defines a batch container (a class with `.to()` and no
    # `.pin_memory()`, like DETR's NestedTensor): used as collate_fn, their batches are never pinned
    unpinned_collates: tuple[str, ...] = ()
    # top-level functions that move tensors to a device (`moves_to_device`), in their own code or in a top-level
    # function of the file they call: used as collate_fn, their batches are on the GPU already
    device_collates: tuple[str, ...] = ()
    # top-level functions that return torch's checkpoint function and nothing else
    # (project/checkpoint_getters.py): what their callers call is torch's (GPU302)
    checkpoint_getters: tuple[str, ...] = ()
    # devices other than CUDA the file names ("mps", "xpu"), and "framework" when a framework picks the
    # device (Accelerate, DeepSpeed, a Lightning Trainer on "gpu"/"auto")
    devices: tuple[str, ...] = ()
    # a tensor or module is copied to a device the code names (`.to(device)`, `.to(args.device)`, `.to(rank)`):
    # the run may put it on an accelerator (ProjectView.accelerated_project)
    device_moved: bool = False
    # module-level names computed from torch's version (`TORCH_2 = version.parse(torch.__version__) >= ...`):
    # a test of one keeps a branch for an older torch
    version_flags: tuple[str, ...] = ()
    # top-level functions that return an instance of one dataset class of the file: name -> class key
    factories: dict[str, str] = field(default_factory=dict)
    # integers the file passes by keyword or sets in config dicts (`Args(n_layers=6)`, `dict(n_layer=6)`,
    # `{"n_layer": 6}`): field -> values; a training script's choice beats a dataclass default
    config_ints: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # the most rows a training step of the file feeds its model, when the benchmark datasets it loads
    # say so (project/graph_data.py); None: unknown
    step_rows: Optional[int] = None
    # (the largest batch, the image side) of a file that trains on a small torchvision benchmark held in memory
    # (project/graph_data.py `image_rows`): a step feeds an MLP batch x side rows at most, a convnet batch x side^2
    image_rows: Optional[tuple[int, int]] = None
    # top-level functions of a file that trains which nothing in the file reaches (no call, no reference,
    # no decorator, no name string), in a file without dynamic dispatch (`fire.Fire()`, `globals()`):
    # dead code unless another file imports this one (project/view.py decides that)
    unreached: tuple[str, ...] = ()
    # private methods of module-level classes of a file that trains which nothing in the file names (project/
    # methods.py `uncalled_methods`: no `x._name` on any receiver, no bare name or string for it, no subclass in
    # the file, no computed getattr), of classes in `plain_classes`: "Class._name"; dead code unless a module
    # importing this one or imported by it names them (project/view.py decides that)
    uncalled_methods: tuple[str, ...] = ()
    # what the file's loops that call an environment (`env.step(action)`, `env.reset()`) call: its own functions
    # and methods they reach through the file ("f", "Class.method"), other code as the file spells it
    # ("trainer.train_step", "DQN.DQN#train" for a method on an instance): project/env_loops.py `env_calls`
    env_calls: tuple[str, ...] = ()
    # module-level classes whose bases lead to `object` through classes gpulint reads (project/methods.py
    # `plain_classes`): class -> the names `from` imports bind among its bases (followed into their modules);
    # a class with a library base (`nn.Module`, a trainer that may call hooks by name) is absent
    plain_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # one-underscore names (no dunders) the file reads as attributes on any receiver (`exp._select_optimizer()`)
    # and spells as strings (`getattr(exp, "_select_optimizer")`, a "_select_" prefix): a private method of a
    # module this one imports, or that imports it, may be called from here
    private_attributes: tuple[str, ...] = ()
    private_strings: tuple[str, ...] = ()
    # the first torch the file cannot run on (`torch_ceiling`): it imports, unconditionally at module level, a
    # module torch (or the torchtext released with it) removed in that release (`from torch._six import inf`:
    # removed in 2.0; `torchtext.legacy`: gone with torch 1.11; any torchtext: none after torch 2.3), asserts at
    # module level an older major version (`assert torch.__version__.split('.')[0] == '1'`: 2.0), fills with
    # uint8 masks it makes (2.1), or reads `loss.data[0]` of a loss it calls `.backward()` on (1.0); None when
    # nothing says so. Its importers run
    # on no newer torch either (a C++14 build, `cpp14_build`, is a ceiling too, carried by project/view.py
    # `ceiling_code` only through the imports that always run)
    torch_ceiling: Optional[tuple[int, int]] = None
    # the first torch the file's `__main__` block refuses (a version assertion there, `version_ceiling`): the
    # file run as a script runs on no newer torch; importing it runs no such block (project/view.py)
    script_ceiling: Optional[tuple[int, int]] = None
    # the loaders whose iterators the file calls `.next()` on (`iter(loader).next()`, an AttributeError from torch
    # 1.13 on: project/iter_next.py): per call, the origins of its loader, `LOADER` for a DataLoader the file
    # builds (then also the file's `torch_ceiling`), "call:<callee as spelled>" for what an imported function
    # returns, which project/view.py resolves against the defining module's `loader_functions`
    iterator_next: tuple[tuple[str, ...], ...] = ()
    # the module-level functions that return a DataLoader the module builds, "f" or "f[<tuple slot>]"
    # (project/iter_next.py `loader_functions`): read only for the `iterator_next` of the modules importing it
    loader_functions: tuple[str, ...] = ()
    # evidence that the file's code runs only on an old torch: it indexes a 0-dim loss (`loss.data[0]`, an
    # IndexError since torch 1.0) or unpacks a PackedSequence into two (a ValueError since 1.1)
    # (`legacy_torch`); "" when nothing says so. Per file: its importers are not judged by it, since importing
    # the file runs none of that code (the certain loss read, of a loss it calls `.backward()` on, is also its
    # `torch_ceiling`, which does reach them, as every ceiling of the code does)
    legacy_torch: str = ""
    # builds the project's native extension with `torch.utils.ffi.create_extension` (a build script of torch 0.4:
    # CenterNet's DCNv2, faster-rcnn's ROI layers): the project's compiled ops need a torch before 1.0
    builds_ffi_extension: bool = False
    # builds a native extension pinned to a C++ standard before C++17 (project/cpp_std.py `pins_pre_cpp17`:
    # `cpp_extension.load(..., extra_cflags=['-std=c++14'])`), which compiles only against torch 2.0 or older:
    # the file's code runs on no torch from 2.1 on (cpp_std.CPP14_CEILING; project/view.py `torch_ceiling`)
    cpp14_build: bool = False
    # the compiled extensions of `extensions` (setup.py's `CUDAExtension`/`CppExtension`) whose
    # `extra_compile_args` pin such a standard: a module importing one runs on torch 2.0 at most
    cpp14_extensions: tuple[str, ...] = ()
    # module-level imports that are alternatives of one another (project/cpp_std.py `import_alternatives`):
    # per group, the imports of each branch of a `try`/`except ImportError` or an `if`/`elif`/`else`
    import_alternatives: tuple[tuple[tuple[ImportRef, ...], ...], ...] = ()
    # the module-level imports of `imports` made in a block (`try`, `if`, other than the `__main__` guard):
    # the others run whenever the module does (project/cpp_std.py `conditional_imports`)
    conditional_imports: tuple[ImportRef, ...] = ()
    # the module's top level only imports, defines functions and classes, and binds names to values it computes
    # without a call (`_defines_only`): no `__main__` block, nothing that runs. Its code runs when a module that
    # imports it calls it (project/view.py `ceiling_importers`)
    defines_only: bool = False
    # a script (a `__main__` guard) that runs models under no_grad/inference_mode and trains nothing (no
    # backward, no optimizer, no trainer): the modules it imports are evaluated here, not trained
    inference_script: bool = False
    # the file turns autograd off somewhere (`torch.no_grad`, `inference_mode`): evidence of evaluation, which
    # with `may_train` false makes a script or notebook an evaluation or inference pass
    grad_off: bool = False
    # the file may train, directly or through a framework: a training step, an optimizer, or the names a
    # trainer brings (`Trainer`, `Runner`, `.fit(`, `.backward`); false only when none is there
    may_train: bool = True
    # top-level classes of the file that subclass Hugging Face's Trainer (HF_TRAINERS, resolved through the
    # imports) directly or through another such class of the file: the project's own trainer (MeZO's
    # `class OurTrainer(Trainer)`), which fine-tunes as Trainer does. A file that builds one trains (`may_train`
    # here; project/view.py `Project._trains_through` for one imported from a project module)
    hf_trainers: tuple[str, ...] = ()
    # backend settings the file makes or reads anywhere (SETTING_* kinds): any mention counts, so a rule
    # that suggests one stays silent where the code already decides it, whichever way
    settings: tuple[str, ...] = ()
    # values the file gives options named like a fused-attention or checkpointing switch (FUSED_OPTION,
    # CHECKPOINT_OPTION; a `gradient_checkpointing_enable()` call turns `gradient_checkpointing` on): by
    # keyword in any call, as a dict key, assigned to another object's attribute or item, or by setattr: option -> kinds
    # (OPTION_ON for True or 1, OPTION_OFF for False, 0 or None, OPTION_UNKNOWN for anything else)
    option_values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # capitalised callees (classes, by the last name the call spells) other than torch's: the most positional
    # arguments a call passes, SPLAT when one passes `*args` or `**kwargs` whose keys the file does not show
    class_calls: dict[str, int] = field(default_factory=dict)
    # class-level bool fields named like a fused-attention switch (`flash_attn: bool = False` in a config
    # dataclass): field -> {class: default}
    option_defaults: dict[str, dict[str, bool]] = field(default_factory=dict)
    # the file freezes a whole network's parameters so that only a small part trains (`_freezes_modules`): a
    # linear probe over a frozen backbone, or a module that freezes the encoder it wraps
    freezes_modules: bool = False
    # calls of imported functions whose result (or a tuple element or dict key of it) a loop of the file
    # iterates and copies to a device (project/loader_flow.py): "<callee as spelled><slot>" -> kinds; the
    # module that builds the loader reads them for GPU101
    moved_results: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what each module-level class does with a value its constructor keeps and a method iterates
    # (loader_flow.member_moves): "<Class>#<position or name>" -> the kinds of the copies
    member_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what each module-level function does with a value handed to it that its own loop iterates
    # (loader_flow.parameter_moves): "<function>#<position or name>" -> the kinds of the copies
    parameter_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what the methods of each module-level class do with a value handed to them (loader_flow.method_moves):
    # "<Class>.<method>#<position after self, or name>" -> the kinds of the copies of that parameter (or its
    # items), and "<Class>.<method>" -> ("returns-self",) for such a class's methods that return `self`
    method_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # module-level names (and `Class.attr` of module-level classes) bound once to a device naming CUDA
    # (a config module's `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`)
    cuda_devices: tuple[str, ...] = ()
    # devices of imported modules the file copies tensors to (`x.to(CFG.device)`), as spelled: CUDA evidence
    # when the module binds them to CUDA (ProjectView.imported_cuda_devices)
    imported_device_targets: tuple[str, ...] = ()
    # module-level functions and methods whose returned object has a device attribute bound only to devices naming
    # CUDA (loader_flow.cuda_returns): "get_config:device", "OptInit.get_args:device"
    cuda_returns: tuple[str, ...] = ()
    # devices the file copies to on a name it binds only to the results of calls of imported names (`x.to(opt.
    # device)` for `opt = OptInit().get_args()`): "opt.device" -> the callees as spelled, a constructor call
    # dropped ("OptInit.get_args"); CUDA evidence when each returns an object whose device is CUDA
    # (ProjectView.returned_cuda). A file that binds `opt.device` itself keeps none for it.
    returned_device_targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the device attributes of `self` each module-level class binds -> whether only to devices naming CUDA
    # (loader_flow.self_devices: a base class's `self.device`, which subclasses in other modules copy to)
    self_devices: dict[str, dict[str, bool]] = field(default_factory=dict)
    # the device attributes of `self` each module-level class copies to but never binds (loader_flow.
    # self_device_copies): CUDA evidence when a project base class binds them to CUDA (ProjectView.inherited_cuda)
    self_device_copies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the attributes of `self` each plain module-level class moves to a device at the top of its `__init__`
    # (methods.init_moves): class -> "<attr>:<device attr>:<method that returned it>", "<attr>::" for `.cuda()`;
    # GPU201's built-on-device for an optimizer a subclass builds in another method (ProjectView.inherited_moves)
    init_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # imports inside functions (not edges of the import graph: `_imports` reads module level only), of modules
    # outside LIBRARY_ROOTS: a factory's `from models.network_swinir import SwinIR as net` in `define_G`, which
    # makes it one more user of that module (ProjectView.evaluated_only)
    lazy_imports: tuple[ImportRef, ...] = ()
    # the digest of the text these facts were read from (`text_digest`; "" when read from a tree alone): the
    # linter takes a view's own facts as they are when it lints that very text, instead of reading them again
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain data for the facts cache and worker processes, derived from the fields (project/codec.py)."""
        return encode_fields(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "FileFacts":
        return decode_fields(cls, data)


# ------------------------------------------------------------------------------------------------
# name resolution through module-level imports

class _Aliases:
    def __init__(self, imports: Iterable[ImportRef]) -> None:
        self.table: dict[str, set[str]] = {}
        for ref in imports:
            if ref.level or ref.name == "*":
                continue
            target = ref.module if ref.name is None else f"{ref.module}.{ref.name}"
            self.table.setdefault(ref.local, set()).add(target)

    def qualified(self, node: ast.AST) -> set[str]:
        """Every qualified name `node` (a dotted chain) may stand for."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return set()
        roots = self.table.get(node.id)
        if not roots:
            return set()
        rest = ".".join(reversed(parts))
        return {f"{root}.{rest}" if rest else root for root in roots}

    def is_any(self, node: ast.AST, names: frozenset[str]) -> bool:
        return bool(self.qualified(node) & names)


def _imports(tree: ast.Module) -> tuple[ImportRef, ...]:
    """Imports at module level, also inside `if`/`try` blocks there (not inside functions)."""
    out: list[ImportRef] = []
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out.append(ImportRef(alias.asname, alias.name, 0, None))
                else:
                    top = alias.name.split(".", 1)[0]
                    out.append(ImportRef(top, top, 0, None))
                    if alias.name != top:  # `import a.b` also makes a.b reachable: remember the edge
                        out.append(ImportRef("", alias.name, 0, None))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    out.append(ImportRef("*", module, node.level, "*"))
                else:
                    out.append(ImportRef(alias.asname or alias.name, module, node.level, alias.name))
    return tuple(out)


def _refs_of(statements: list[ast.stmt]) -> tuple[ImportRef, ...]:
    """`_imports` of a list of module-level statements."""
    return _imports(ast.Module(body=statements, type_ignores=[]))


def _lazy_imports(tree: ast.Module) -> tuple[ImportRef, ...]:
    """The imports below module level (in functions and methods), as `_imports` records module-level ones,
    leaving out the libraries of LIBRARY_ROOTS (never a project's module)."""
    top = {id(node) for node in _module_level(tree.body)}
    inner = [n for n in all_nodes(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top]
    refs = _imports(ast.Module(body=inner, type_ignores=[]))  # type: ignore[arg-type]
    return tuple(dict.fromkeys(r for r in refs if r.level or r.module.split(".", 1)[0] not in LIBRARY_ROOTS))


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` and of the `if` and `try` blocks in it, in source order (preorder)."""
    out: list[ast.stmt] = []
    _add_module_level(body, out)
    return out


def _add_module_level(body: list[ast.stmt], out: list[ast.stmt]) -> None:
    for node in body:
        out.append(node)
        kind = type(node)
        if kind is ast.If:
            _add_module_level(node.body, out)  # type: ignore[attr-defined]
            _add_module_level(node.orelse, out)  # type: ignore[attr-defined]
        elif kind is ast.With:  # `with warnings.catch_warnings(): import h5py` runs at import time too
            _add_module_level(node.body, out)  # type: ignore[attr-defined]
        elif kind in _TRIES:
            _add_module_level(node.body, out)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                _add_module_level(handler.body, out)
            _add_module_level(node.orelse, out)  # type: ignore[attr-defined]
            _add_module_level(node.finalbody, out)  # type: ignore[attr-defined]


_TRIES = frozenset({ast.Try, getattr(ast, "TryStar", ast.Try)})


# words of a receiver's name that say it is a whole network (`self.model`, `self.backbone`, `self.text_encoder`)
_ENCODER_WORDS = frozenset({
    "model", "backbone", "encoder", "bert", "vit", "resnet", "transformer", "features", "trunk", "extractor",
})
# words that say the frozen network is another one beside the one trained (an EMA teacher, a GAN's
# discriminator, a diffusion model's autoencoder or conditioning stage): its freeze says nothing about
# how much the optimizer steps
_SIDE_WORDS = frozenset({
    "teacher", "ema", "target", "momentum", "key", "disc", "discriminator", "critic", "stage", "cond", "vae",
    "autoencoder", "ref", "reference", "reward", "value",
})
_PROBE, _ENCODER, _WHOLE = "probe", "encoder", "whole"


def _freezes_modules(tree: ast.Module) -> bool:
    """The file freezes a whole network so that only a small part of it trains.

    Three shapes count: a loop over `named_parameters()` that turns `requires_grad` off for every
    parameter but a literal list of names (the linear probe: `if name not in ["fc.weight", "fc.bias"]`) or
    every parameter whose name lacks an adapter word (`if "lora" in name: ... else: p.requires_grad = False`);
    a module that freezes the whole encoder it wraps (`for p in self.model.parameters(): p.requires_grad =
    trainable`, any value neither literally True nor a flag the file sets True, or
    `self.backbone.requires_grad_(False)`); and a whole model
    frozen (`model.requires_grad_(False)`, a loop over `model.parameters()`) in a file whose optimizer takes
    only the parameters that still require grad (`filter(lambda p: p.requires_grad, ...)`). A freeze under
    any other condition (`if "embed" in name`), of a part (`model.embeddings`), or of a network beside the
    trained one (a teacher, a discriminator, a VAE, the feature extractor of a loss class such as a perceptual
    `ContentLoss`, or a class of the file that only its loss classes build, KAIR's `VGGFeatureExtractor` inside
    `PerceptualLoss`) does not count: the rest may be large.
    """
    loop_targets = {n.id for node in all_nodes(tree) if isinstance(node, (ast.For, ast.comprehension))
                    for n in walk(node.target) if isinstance(n, ast.Name)}
    maybe_true = _names_given_true(tree)
    in_losses = {id(n) for node in _loss_classes(tree) for n in walk(node)}
    shapes: set[str] = set()
    filtered = False
    for node in all_nodes(tree):
        if id(node) in in_losses:
            continue  # a loss's network (VGG features of a perceptual loss) is beside the one trained
        if isinstance(node, ast.For):
            shape = _freeze_loop(node, maybe_true)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "requires_grad_" \
                and _not_true(node.args[0] if node.args else None, False, maybe_true):
            receiver = node.func.value
            shape = None if isinstance(receiver, ast.Name) and receiver.id in loop_targets else _receiver(receiver)
        else:
            filtered = filtered or _keeps_trainable(node)
            continue
        if shape is not None:
            shapes.add(shape)
    return _PROBE in shapes or _ENCODER in shapes or (_WHOLE in shapes and filtered)


def _loss_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The classes of a loss, whose networks are beside the one trained: every class named like a loss, and every
    module-level class of the file built only inside those (a perceptual loss's `self.vgg = VGGFeatureExtractor()`;
    a class built anywhere else in the file, or never, may be the trained model's backbone)."""
    classes = [n for n in all_nodes(tree) if isinstance(n, ast.ClassDef)]
    losses = [c for c in classes if "loss" in c.name.lower()]
    if not losses:
        return losses
    inside = {id(n) for c in losses for n in walk(c)}
    built: dict[str, list[bool]] = {}  # class name -> for each call of it, whether a loss class makes it
    for node in all_nodes(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            built.setdefault(node.func.id, []).append(id(node) in inside)
    return losses + [c for c in tree.body if isinstance(c, ast.ClassDef) and c not in losses
                     and built.get(c.name) and all(built[c.name])]


def parameter_loop(loop: ast.For) -> Optional[tuple[ast.expr, Optional[str], str]]:
    """For `for [name,] param in <network>.parameters()/named_parameters()`: the network, the name and
    the parameter the loop binds (None: not such a loop)."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("parameters", "named_parameters")):
        return None
    target = loop.target
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts):
        return it.func.value, target.elts[0].id, target.elts[1].id  # type: ignore[attr-defined]
    if isinstance(target, ast.Name):
        return it.func.value, None, target.id
    return None


def _freeze_loop(loop: ast.For, maybe_true: set[str]) -> Optional[str]:
    """The shape of freeze a `for ... in <receiver>.parameters()/named_parameters()` loop makes, if any."""
    header = parameter_loop(loop)
    if header is None:
        return None
    network, name, param = header
    for statement in loop.body:
        if _turns_off(statement, param, maybe_true):
            return _receiver(network)
        if isinstance(statement, ast.If) and not statement.orelse and name is not None \
                and _all_but_named(statement.test, name) \
                and any(_turns_off(s, param, maybe_true) for s in statement.body):
            return _PROBE
        if isinstance(statement, ast.If) and name is not None and _adapter_test(statement, name, param, maybe_true):
            return _PROBE
    return None


# words in the names of adapter parameters (LoRA, bottleneck adapters, prompt/prefix tuning): a loop that freezes
# every parameter whose name lacks one trains the adapters alone, a small part of the network
_ADAPTER_WORDS = ("lora", "adapter", "prompt", "prefix")


def _adapter_test(statement: ast.If, name: str, param: str, maybe_true: set[str]) -> bool:
    """`if "lora" in name: ... else: param.requires_grad = False`, or `if "lora" not in name: <freeze>`."""
    test = statement.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and isinstance(test.comparators[0], ast.Name) and test.comparators[0].id == name):
        return False
    word = _string(test.left)
    if word is None or not any(w in word.lower() for w in _ADAPTER_WORDS):
        return False
    freezing = statement.orelse if isinstance(test.ops[0], ast.In) else statement.body
    return any(_turns_off(s, param, maybe_true) for s in freezing)


def _turns_off(statement: ast.stmt, param: str, maybe_true: set[str]) -> bool:
    """`param.requires_grad = <not literally True>` or `param.requires_grad_(<not literally True>)`."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return isinstance(target, ast.Attribute) and target.attr == "requires_grad" \
            and isinstance(target.value, ast.Name) and target.value.id == param \
            and _not_true(statement.value, True, maybe_true)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        return isinstance(call.func, ast.Attribute) and call.func.attr == "requires_grad_" \
            and isinstance(call.func.value, ast.Name) and call.func.value.id == param \
            and _not_true(call.args[0] if call.args else None, False, maybe_true)
    return False


def _not_true(value: Optional[ast.expr], missing_is_false: bool, maybe_true: set[str]) -> bool:
    """A requires_grad value gpulint cannot show to be True (None: the argument is absent, which means True):
    not the literal True, nor a flag (`trainable`, `CFG.trainable`) the file gives True anywhere."""
    if value is None:
        return missing_is_false
    if isinstance(value, ast.Constant):
        return value.value is not True
    last = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else None
    return last is None or last not in maybe_true


def _names_given_true(tree: ast.Module) -> set[str]:
    """Names the file sets to True (`trainable = True` in a config class, `cfg.trainable = True`,
    `Encoder(trainable=True)`, `{"trainable": True}`), and the function parameters whose default is one
    of them (`def __init__(self, trainable=CFG.trainable)` in a notebook whose CFG says True)."""
    given: set[str] = set()
    defaults: list[tuple[str, ast.expr]] = []
    for node in all_nodes(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if not (isinstance(node.value, ast.Constant) and node.value.value is True):
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                spelled = target.id if isinstance(target, ast.Name) else target.attr \
                    if isinstance(target, ast.Attribute) else _string(target.slice) \
                    if isinstance(target, ast.Subscript) else None
                if spelled is not None:
                    given.add(spelled)
        elif isinstance(node, ast.keyword):
            if node.arg is not None and isinstance(node.value, ast.Constant) and node.value.value is True:
                given.add(node.arg)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                spelled = _string(key)
                if spelled is not None and isinstance(value, ast.Constant) and value.value is True:
                    given.add(spelled)
        elif isinstance(node, ast.arguments):
            positional = node.posonlyargs + node.args
            defaults += [(a.arg, d) for a, d in zip(positional[len(positional) - len(node.defaults):], node.defaults)]
            defaults += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
    for param, default in defaults:
        last = default.id if isinstance(default, ast.Name) else default.attr \
            if isinstance(default, ast.Attribute) else None
        if last in given or (isinstance(default, ast.Constant) and default.value is True):
            given.add(param)
    return given


# the freeze shapes above, read again within one function by GPU201's update-share premise
# (analysis/update_share.py): the words of adapter parameters, the adapter name test, a statement that turns
# `requires_grad` off, a value not shown to be True, and the names a file sets True
ADAPTER_WORDS = _ADAPTER_WORDS
adapter_test = _adapter_test
turns_off = _turns_off
not_true = _not_true
names_given_true = _names_given_true


def _all_but_named(test: ast.expr, name: str) -> bool:
    """`name not in ["fc.weight", "fc.bias"]`: every parameter but a literal few."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn) \
        and isinstance(test.left, ast.Name) and test.left.id == name \
        and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set)) \
        and 0 < len(test.comparators[0].elts) <= 8 \
        and all(_string(e) is not None for e in test.comparators[0].elts)


def _receiver(node: ast.expr) -> Optional[str]:
    """What freezing all of `node`'s parameters says: a wrapped encoder (`self.model`), a whole model
    (`model`), or nothing (a part such as `model.embeddings`, or a network beside the trained one)."""
    if isinstance(node, ast.Name):
        return None if set(node.id.lower().split("_")) & _SIDE_WORDS or node.id == "self" else _WHOLE
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        parts = node.attr.lower().split("_")
        if set(parts) & _SIDE_WORDS or parts[-1] not in _ENCODER_WORDS:
            return None
        return _ENCODER
    return None


def _keeps_trainable(node: ast.AST) -> bool:
    """`filter(lambda p: p.requires_grad, ...)` or `[p for p in ... if p.requires_grad]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "filter" and node.args:
        first = node.args[0]
        return isinstance(first, ast.Lambda) and isinstance(first.body, ast.Attribute) \
            and first.body.attr == "requires_grad"
    if isinstance(node, ast.comprehension):
        return any(isinstance(c, ast.Attribute) and c.attr == "requires_grad" for c in node.ifs)
    return False


def _string(node: Optional[ast.AST]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _hides_every_gpu(node: ast.Assign) -> bool:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = ""` (or "-1"): CUDA sees no device, so the script trains on the CPU."""
    if _string(node.value) not in ("", "-1"):
        return False
    for target in node.targets:
        if isinstance(target, ast.Subscript) and _string(target.slice) == "CUDA_VISIBLE_DEVICES":
            environ = target.value
            if (isinstance(environ, ast.Attribute) and environ.attr == "environ") or (
                    isinstance(environ, ast.Name) and environ.id == "environ"):
                return True
    return False


def _is_cuda_string(value: Optional[str]) -> bool:
    return value is not None and (value == "cuda" or value.startswith("cuda:") or value == "nccl")


def _holds_options(node: ast.AST) -> bool:
    """`args.__dict__` or `vars(args)`: the parsed options as a dict, which a store or an update rewrites."""
    return (isinstance(node, ast.Attribute) and node.attr == "__dict__") or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars")


def _literal(node: ast.AST) -> Any:
    """The int, float, str, bool or None an expression spells (`ast.literal_eval`), else None. Only a constant
    or a sign before one can spell one: any other expression `literal_eval` refuses or reads as a container or
    a complex number, so it is not evaluated (a large config dict was, only to be dropped)."""
    kind = type(node)
    if kind is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
    elif kind is ast.UnaryOp:
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    else:
        return None
    return value if isinstance(value, (int, float, str, bool)) or value is None else None


def _default_literal(node: ast.AST) -> Any:
    """An option's literal default: what `_literal` reads, or a list of ints (`nargs="+", default=[16, 16, 16]`,
    the hidden widths of a stacked model), kept as a list; None for anything else."""
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
        return values if len(values) == len(node.elts) else None
    return _literal(node)


# ------------------------------------------------------------------------------------------------
# the scan

def _names_device(node: ast.AST) -> bool:
    """`device`, `self.device`, `args.device`, `local_rank`: an expression that names a device."""
    if isinstance(node, ast.Name):
        name = node.id.lower()
    elif isinstance(node, ast.Attribute):
        name = node.attr.lower()
    else:
        return False
    return "device" in name or name in ("local_rank", "rank", "gpu", "gpu_id")


# the nodes _returned_device_targets reads: bindings of a name or attribute, `setattr(...)` calls
_BINDING_KINDS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Call, ast.For, ast.AsyncFor, ast.withitem,
                            ast.NamedExpr})


def _returned_device_targets(tree: ast.Module, targets: set[str], imported: set[str]) -> dict[str, tuple[str, ...]]:
    """FileFacts.returned_device_targets: of the devices the file copies to (`opt.device`), those on a name
    every plain binding of which (`opt = ...`, in any scope) is a call of an imported name: `OptInit().get_args()`,
    `config.get_config()`, `get_args()`; a binding of the attribute itself (`opt.device = ...`, `setattr(opt,
    ...)`) or of the name to anything else drops it."""
    roots = {t.split(".", 1)[0] for t in targets}
    callees: dict[str, set[str]] = {}
    spoiled: set[str] = set()
    for node in all_nodes(tree):
        if type(node) not in _BINDING_KINDS:  # (most nodes: one set lookup)
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and target.id in roots:
                    callee = None if isinstance(node, ast.AugAssign) else _imported_callee(node.value, imported)
                    if callee is None:
                        spoiled.add(target.id)
                    else:
                        callees.setdefault(target.id, set()).add(callee)
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    spoiled.add(f"{target.value.id}.{target.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name):
            spoiled.add(node.args[0].id)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr)):
            bound = node.target if isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr)) else node.optional_vars
            spoiled.update(n.id for n in walk(bound) if isinstance(n, ast.Name)) if bound is not None else None
    return {t: tuple(sorted(callees[root])) for t in sorted(targets) for root in [t.split(".", 1)[0]]
            if root in callees and root not in spoiled and root not in imported and t not in spoiled}


def _imported_callee(value: Optional[ast.expr], imported: set[str]) -> Optional[str]:
    """`OptInit().get_args()` -> "OptInit.get_args", `config.get_config()` -> "config.get_config", for a call
    whose first name a module-level import binds (`imported`, relative imports too); None for anything else."""
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and not func.value.args \
            and not func.value.keywords:  # a method of a new instance: `OptInit().get_args()`
        inner = dotted(func.value.func)
        spelled = f"{inner}.{func.attr}" if inner is not None else None
    else:
        spelled = dotted(func)
    return spelled if spelled is not None and spelled.split(".", 1)[0] in imported else None


def _assigns_device_index(node: ast.Assign) -> bool:
    """`device = 0`, `local_rank = 1`: an integer bound to a name that holds a device."""
    value = node.value
    if not (isinstance(value, ast.Constant) and type(value.value) is int):
        return False
    return any(_names_rank(t) or "device" in getattr(t, "id", getattr(t, "attr", "")).lower() for t in node.targets)


def _names_rank(node: ast.AST) -> bool:
    """`local_rank`, `args.gpu`, `self.rank`: a process's GPU index, which only CUDA takes as a device."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.lower() in ("local_rank", "rank", "gpu", "gpu_id", "device_id", "gpu_index", "local_gpu")


_FRAMEWORK_DEVICE_CALLS = frozenset({"Accelerator", "initialize", "Trainer", "Fabric", "LightningCLI"})


def _moves_to_device(call: ast.Call, aliases: _Aliases) -> bool:
    """`.cuda()`, `.to(device)`, `.to("cuda")`, a torch factory with `device=` not "cpu"."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return True
    if isinstance(func, ast.Attribute) and func.attr == "to":
        targets = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "device"]
        return any(_is_cuda_string(_string(t)) or _names_device(t) for t in targets)
    if aliases.is_any(func, _FACTORIES_ON_DEVICE):
        for keyword in call.keywords:
            if keyword.arg == "device" and _string(keyword.value) != "cpu":
                return True
    return False


def _is_dtype_16(node: ast.AST, aliases: _Aliases) -> bool:
    return aliases.is_any(node, HALF_DTYPES)


# the last name of every call whose qualified name the scan compares
_QUALIFIED_CALLS = frozenset(
    {q.rsplit(".", 1)[-1] for q in GRAD_SCALERS | AUTOCASTS | FSDP_MIXED_PRECISION | OPTIMIZER_CLASSES
     | FSDP_WRAPPERS | TENSOR_PARALLEL | DATA_PARALLEL}
    | {"set_default_dtype", "device", "initialize", "Accelerator", "Trainer", "Fabric", "LightningCLI",
       "create_extension"}
)
# `x.to_sparse()`, `torch.sparse_coo_tensor(...)`, `torch.spmm(...)`, `torch.sparse.mm(...)`
_SPARSE_CALLS = frozenset({
    "to_sparse", "to_sparse_coo", "to_sparse_csr", "sparse_coo_tensor", "sparse_csr_tensor", "spmm",
    "sparse_mask",
})
# torch.utils.cpp_extension: JIT builders (`load`, `load_inline`) and setup.py's extension classes
_CPP_EXTENSION = "torch.utils.cpp_extension"
_JIT_BUILDERS = frozenset({f"{_CPP_EXTENSION}.load", f"{_CPP_EXTENSION}.load_inline"})
_EXTENSION_CLASSES = frozenset({f"{_CPP_EXTENSION}.CUDAExtension", f"{_CPP_EXTENSION}.CppExtension"})
def _dtype_casts(tree: ast.Module) -> dict[str, tuple[str, int]]:
    """Top-level functions that cast every parameter of a model to a dtype one of their parameters names:
    they assert it (`all(p.dtype == dtype for p in model.parameters())`), cast each parameter's data
    (`p.data = p.data.to(dtype)`), or cast the model they return (`model.to(dtype=dtype)`, `return
    net.to(device, dtype)`). A cast of anything else (a batch, a state dict's tensors) is no evidence."""
    found: dict[str, tuple[str, int]] = {}
    for fn in tree.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        params = {**{a.arg: -1 for a in fn.args.kwonlyargs}, **{name: i for i, name in enumerate(positional)}}
        if not params:
            continue  # the dtype must be one of its parameters
        nodes = walk(fn)
        returns = [n for n in nodes if isinstance(n, ast.Return)]
        returned = {n.value.id for n in returns if isinstance(n.value, ast.Name)}
        returned_calls = {id(n.value) for n in returns}
        for node in nodes:
            dtype = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to":
                receiver = node.func.value
                # `.to(dtype)`, `.to(device, dtype)`, `.to(dtype=dtype)`
                given = [k.value for k in node.keywords if k.arg == "dtype"] or node.args[1:2] or node.args[:1]
                if isinstance(receiver, ast.Attribute) and receiver.attr == "data" or id(node) in returned_calls \
                        or isinstance(receiver, ast.Name) and receiver.id in returned and receiver.id not in params:
                    dtype = next((a.id for a in given if isinstance(a, ast.Name) and a.id in params), None)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "all" \
                    and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp):
                dtype = _every_parameter_is(node.args[0], params)
            if dtype is not None:
                found[fn.name] = (dtype, params[dtype])
                break
    return found


def _every_parameter_is(generator: ast.GeneratorExp, params: dict[str, int]) -> Optional[str]:
    """`p.dtype == dtype for p in model.parameters()`: the parameter of `params` every parameter's dtype equals."""
    test, loops = generator.elt, generator.generators
    if len(loops) != 1 or loops[0].ifs or not isinstance(loops[0].target, ast.Name):
        return None
    source = loops[0].iter
    if not (isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute)
            and source.func.attr == "parameters"):
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    sides = [test.left, test.comparators[0]]
    owned = any(isinstance(x, ast.Attribute) and x.attr == "dtype" and isinstance(x.value, ast.Name)
                and x.value.id == loops[0].target.id for x in sides)
    named = [x.id for x in sides if isinstance(x, ast.Name) and x.id in params]
    return named[0] if owned and named else None


def _maps_rows(fn: ast.AST) -> bool:
    """The function returns something and calls `.map(...)` on a dataset, with no per-item transform."""
    methods = {n.func.attr for n in walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in walk(fn))
    return returns and "map" in methods and not {"with_transform", "set_transform"} & methods


def _defined_names(statement: ast.stmt) -> list[str]:
    """Top-level names a module-level statement defines (class, def, plain assignment)."""
    if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [statement.name]
    if isinstance(statement, ast.Assign):
        return [t.id for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value is not None:
        return [statement.target.id]
    return []


_LIGHTNING = frozenset({"lightning", "pytorch_lightning", "lightning_fabric"})


def _is_batch_container(node: ast.ClassDef) -> bool:
    """A plain class that moves itself with `.to(device)` but has no `.pin_memory()`: the DataLoader's
    pin thread passes such objects through unpinned (DETR's NestedTensor)."""
    methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "to" not in methods or "pin_memory" in methods:
        return False
    for base in node.bases:  # a module, a tensor or a mapping subclass is not such a container
        name = base.attr if isinstance(base, ast.Attribute) else (base.id if isinstance(base, ast.Name) else "")
        if name not in ("object", ""):
            return False
    return True


_HEAD_LAYERS = frozenset({"Linear", "LazyLinear", "Bilinear"})


def _few_tensors(node: ast.ClassDef, bases: list[str], layers: Optional[tuple[Layer, ...]]) -> bool:
    """A head of one or two Linear layers (ClassFacts.head): the class derives from nn.Module alone, its
    `__init__` builds at most two Linear layers and no other layer with weights (norms, pooling and dropout
    are not layers here, project/layers.py), calls no helper method of its own, and holds no loop or
    comprehension that could build a layer many times. Anything unread (a base class, a module handed in,
    a library model) makes it no head."""
    if not layers or len(layers) > 2 or bases != ["torch.nn.Module"]:
        return False
    if any(layer.kind != DIMS or layer.name not in _HEAD_LAYERS for layer in layers):
        return False
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None or not init.args.args:
        return False
    me = init.args.args[0].arg
    methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for sub in walk(init):
        if isinstance(sub, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                            ast.GeneratorExp)):
            return False
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in methods \
                and isinstance(sub.func.value, ast.Name) and sub.func.value.id == me:
            return False
    return True


# backend settings (FileFacts.settings), by the attribute that names them and what it must resolve to
SETTING_MATMUL_PRECISION = "matmul-precision"  # TF32 / float32 matmul precision, either API
SETTING_CUDNN_BENCHMARK = "cudnn-benchmark"
SETTING_DETERMINISTIC = "deterministic"  # cudnn.deterministic, use_deterministic_algorithms
SETTING_COMPILE = "compile"  # torch.compile, Module.compile(), dynamo/inductor configuration
SETTING_CHANNELS_LAST = "channels-last"
# attribute names specific enough to count wherever they appear, resolved or not
_SETTING_ATTRIBUTES = {
    "set_float32_matmul_precision": SETTING_MATMUL_PRECISION,
    "allow_tf32": SETTING_MATMUL_PRECISION,
    "fp32_precision": SETTING_MATMUL_PRECISION,
    "use_deterministic_algorithms": SETTING_DETERMINISTIC,
    "channels_last": SETTING_CHANNELS_LAST,
}
# attribute names that count only on cuDNN's settings (`torch.backends.cudnn.benchmark`, `cudnn.benchmark`)
_CUDNN_ATTRIBUTES = {"benchmark": SETTING_CUDNN_BENCHMARK, "deterministic": SETTING_DETERMINISTIC}
_COMPILE_MODULES = ("torch.compile", "torch._dynamo", "torch._inductor")


class _Scanner:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports = _imports(tree)
        self.aliases = _Aliases(self.imports)
        self.gpu = False
        self.cpu = False
        self.sparse = False
        self.native_kernels = False
        self.extensions: set[str] = set()
        # names bound to the extension classes (`extension = CUDAExtension`, then `extension("name", ...)`: the
        # setup.py of Deformable DETR's ops picks CppExtension or CUDAExtension by what the machine has)
        self._extension_names = self._extension_aliases()
        self.cpp14_build = False
        self.cpp14_extensions: set[str] = set()
        self.grad_flags = False  # the file touches `requires_grad` (freezes are looked for only then)
        self.scaler = False
        self.sharded_scaler = False
        self.mixed: set[str] = set()
        # layers built with `dtype=cfg["dtype"]`, and the dtypes the file's dicts give the key "dtype" (True:
        # 16 bits): every such dict in 16 bits makes a model built in them (LLMs-from-scratch's Llama notebook)
        self._dtype_from_key = False
        self.ffi_extension = False
        self.next_calls: list[ast.Call] = []  # `<x>.next()` (project/iter_next.py reads them: FileFacts.iterator_next)
        self.loader_lines: list[int] = []  # the lines of `DataLoader(...)` calls (FileFacts.loader_functions)
        self.return_lines: list[int] = []  # the lines of `return <value>` (FileFacts.loader_functions)
        # names bound from calls (name -> the call's root name) and the names handed to capitalised callees
        # (root, names): a loader an imported function returns, handed to an imported class (loader_flow.HAND)
        self._call_results: dict[str, str] = {}
        self._handed_to_classes: list[tuple[str, list[str]]] = []
        self._dtype_keys: set[bool] = set()
        self.backward = False
        self.steps = False
        self.optimizer_made = False
        self.parallelism: set[str] = set()
        self.fused_sgd = False
        self.argparse: dict[str, Any] = {}
        self._set_defaults: dict[str, Any] = {}  # `parser.set_defaults(layers=[16, 16, 16])`
        self._no_default: set[str] = set()  # options declared without `default=`: `set_defaults` gives theirs
        self.devices: set[str] = set()
        self.config: dict[str, list[int]] = {}
        self.module_ints = _module_ints(tree)
        self.settings: set[str] = set()
        self.options: dict[str, set[str]] = {}
        self.passed_args: list[tuple[str, str]] = []  # (option, attribute) for `flash=args.flash`
        self.args_rewritten = False  # the parsed arguments may change after parsing (see _option_values)
        self.bool_flags: set[str] = set()  # argparse dests declared as store_true/store_false (FileFacts.bool_flags)
        self.other_flags: set[str] = set()  # argparse dests declared some other way
        self.options_by_name = False  # the file may set parsed options by computed name (FileFacts.bool_flags)
        self.class_calls: dict[str, int] = {}
        self.device_targets: set[str] = set()
        self.local_device_targets: set[str] = set()  # `x.to(opt.device)` on a name no import binds
        self.self_device_bound = False  # `self.<device> = ...` somewhere (FileFacts.self_devices is read only then)
        self.self_device_copied = False  # `x.to(self.<device>)` somewhere (FileFacts.self_device_copies)
        self.device_setattr = False  # `setattr(x, "device", ...)` somewhere (FileFacts.cuda_returns is read only then)
        self.lazy = False  # an import below module level (FileFacts.lazy_imports is read only then)
        self.loops: list[ast.AST] = []  # every `for` loop (project/loader_flow.py reads on only when one copies)
        self.copy_lines: list[int] = []  # the lines of `.to(...)`/`.cuda(...)` calls in classes (method_moves)
        # the lines of every call `_moves_to_device` may accept (`.to(...)`, `.cuda(...)`, one passing `device=`):
        # only a function spanning one can move tensors in its own code (_device_collates)
        self.mover_lines: list[int] = []
        self.device_keyword = False  # a call passes `device=` (FileFacts.device_collates are looked for only then)
        self.device_moved = False  # FileFacts.device_moved

    def run(self, source: str = "") -> FileFacts:
        names: set[str] = set()
        private_attributes: set[str] = set()
        private_strings: set[str] = set()
        dict_lookups: set[str] = set()
        refs: dict[str, set[str]] = {}
        cuda_names = {local for local, targets in self.aliases.table.items()
                      if any(t.startswith(("torch.cuda", "torch.accelerator")) for t in targets)}
        Call, Constant, Attribute, Name, Assign = ast.Call, ast.Constant, ast.Attribute, ast.Name, ast.Assign
        Store = ast.Store
        stored: set[str] = set()  # attributes the file binds (`args.device = ...`): cuda_returns is asked only then
        Dict, Subscript, For, AsyncFor, Import, ImportFrom, Return = ast.Dict, ast.Subscript, ast.For, ast.AsyncFor, \
            ast.Import, ast.ImportFrom, ast.Return
        # the file indexes `<x>.data[0]` somewhere: the reads legacy_torch and reads_zero_dim_loss look for
        data_zero = False
        versioned = False  # the file reads torch.__version__ somewhere (version flags are looked for only then)
        # packages imported anywhere, in functions too (a marimo notebook imports gymnasium in a cell function):
        # evidence of what the file runs on (`rl`), not names to resolve (those stay module-level, `imports`)
        anywhere: set[str] = set()
        aliased: set[str] = set()  # names a `from ... import name as other` anywhere renames
        imports = 0  # import statements anywhere: more than at module level, and some are lazy (FileFacts.lazy_imports)
        for statement in self.tree.body:
            defined = _defined_names(statement)
            used: set[str] = set()
            in_class = type(statement) is ast.ClassDef  # (method_moves reads the copies of module-level classes)
            for node in fast_walk(statement):
                kind = type(node)
                if kind is Name:
                    used.add(node.id)  # type: ignore[attr-defined]
                    if node.id in cuda_names:  # type: ignore[attr-defined]
                        self.gpu = True
                elif kind is Attribute:
                    attr = node.attr  # type: ignore[attr-defined]
                    names.add(attr)
                    if type(node.ctx) is Store:  # type: ignore[attr-defined]
                        stored.add(attr)
                    if attr[:1] == "_" and mentions_name(attr):
                        private_attributes.add(attr)
                    if attr in ("requires_grad", "requires_grad_"):
                        self.grad_flags = True
                    if attr == "__version__":
                        versioned = True
                    if attr == "__dict__":
                        self.args_rewritten = True  # `args.__dict__.update(config)` may set any option
                        if isinstance(node.value, ast.Name):  # type: ignore[attr-defined]
                            dict_lookups.add(node.value.id)  # type: ignore[attr-defined]
                    if attr in ("cuda", "accelerator") and not self.gpu and any(
                            q in ("torch.cuda", "torch.accelerator") for q in self.aliases.qualified(node)):
                        self.gpu = True
                    elif attr in ("mps", "xpu") and any(q in ("torch.backends.mps", "torch.mps", "torch.xpu")
                                                         for q in self.aliases.qualified(node)):
                        self.devices.add(attr)
                    elif attr in _SETTING_ATTRIBUTES:
                        self.settings.add(_SETTING_ATTRIBUTES[attr])
                    elif attr == "compile" and self._compiles(node):  # type: ignore[arg-type]
                        self.settings.add(SETTING_COMPILE)
                    elif attr in _CUDNN_ATTRIBUTES and self._names_cudnn(node.value):  # type: ignore[attr-defined]
                        self.settings.add(_CUDNN_ATTRIBUTES[attr])
                elif kind is Call:
                    self._call(node)  # type: ignore[arg-type]
                    callee = node.func  # type: ignore[attr-defined]
                    if type(callee) is Attribute and callee.attr in ("to", "cuda"):
                        self.mover_lines.append(node.lineno)  # type: ignore[attr-defined]
                        if in_class:
                            self.copy_lines.append(node.lineno)  # type: ignore[attr-defined]
                elif kind is Constant:
                    value = node.value  # type: ignore[attr-defined]
                    if type(value) is str and value[:1] == "_" and mentions_name(value) and value.isidentifier():
                        private_strings.add(value)
                    # os.environ["LOCAL_RANK"]: one process per GPU (torchrun)
                    if type(value) is str and (_is_cuda_string(value) or value == "LOCAL_RANK"):
                        self.gpu = True
                    elif type(value) is str and value.split(":", 1)[0] in ("mps", "xpu"):
                        self.devices.add(value.split(":", 1)[0])
                elif kind is Assign:
                    self._assign(node)  # type: ignore[arg-type]
                elif kind is Subscript:
                    if not data_zero and _data_zero_base(node) is not None:  # type: ignore[arg-type]
                        data_zero = True
                elif kind is For or kind is AsyncFor:
                    self.loops.append(node)
                elif kind is Import:
                    imports += 1
                    anywhere.update(a.name.split(".", 1)[0] for a in node.names)  # type: ignore[attr-defined]
                elif kind is ImportFrom:
                    imports += 1
                    aliased.update(a.name for a in node.names if a.asname)  # type: ignore[attr-defined]
                    if not node.level and node.module:  # type: ignore[attr-defined]
                        anywhere.add(node.module.split(".", 1)[0])  # type: ignore[attr-defined]
                elif kind is Dict:
                    for key, value in zip(node.keys, node.values):  # type: ignore[attr-defined]
                        if isinstance(key, Constant) and type(key.value) is str:
                            self._option(key.value, value)
                            if key.value == "dtype":
                                self._dtype_keys.add(_is_dtype_16(value, self.aliases))
                elif kind is Return and node.value is not None:  # type: ignore[attr-defined]
                    self.return_lines.append(node.lineno)  # type: ignore[attr-defined]
            names |= used
            for name in defined:
                refs.setdefault(name, set()).update(used)
        top = set(refs)
        iterator_next = next_origins(self.tree, self.next_calls, self._is_loader, frozenset(
            r.local for r in self.imports if r.local and r.name != "*")) if self.next_calls and "iter" in names else ()
        self.lazy = imports > sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in _module_level(self.tree.body))
        roots = {ref.module.split(".", 1)[0] for ref in self.imports if not ref.level}
        classes = self._classes()
        for node in _module_level(self.tree.body):  # `MNIST = _MNIST`: the same class under another name
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in classes:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in classes:
                        classes[target.id] = classes[node.value.id]
        # a file that runs a training step, or builds an optimizer for one (`main_pretrain.py` builds the
        # AdamW, `engine_pretrain.py` steps it): its models are trained
        training = (self.backward and self.steps) or self.optimizer_made
        hf_trainers = hf_trainer_classes(classes)
        may_train = training or self.backward or bool(names & _TRAINING_NAMES) \
            or any(name in self.class_calls for name in hf_trainers)  # `MyTrainer(...)` over a Seq2SeqTrainer
        grad_off = bool(names & _GRAD_OFF_NAMES)
        if any(t.startswith(_COMPILE_MODULES) for targets in self.aliases.table.values() for t in targets):
            self.settings.add(SETTING_COMPILE)  # `from torch import compile`, dynamo/inductor configuration
        imported = {r.local or r.module.split(".", 1)[0] for r in self.imports if r.name != "*"}
        # a loader an imported function returns, handed to an imported class (`Solver(config, train_loader)`)
        hands = hands_results_to_a_class(self._call_results, self._handed_to_classes, imported)
        moved = moved_results(self.tree, imported, self.loops, fast_walk, star=any(r.name == "*" for r in self.imports),
                              hands=hands) if (self.loops and names & {"to", "cuda"}) or hands else {}
        main = _main_guard(self.tree)
        plain = plain_classes(self.tree, self.aliases.qualified,
                              frozenset(r.local for r in self.imports if r.name not in (None, "*")))
        numpy_used = "numpy" in names or "numpy" in roots  # `.numpy()`, or numpy functions (`np.percentile`)
        if self._dtype_from_key and self._dtype_keys == {True}:
            self.mixed.add("model-cast")  # every "dtype" the file's configs give its layers is 16 bits
        if any(t == "clip" or t.startswith("clip.") for targets in self.aliases.table.values() for t in targets) \
                and self._clip_half():
            self.mixed.add("model-cast")  # a CLIP model loaded on the GPU: its weights are float16
        return FileFacts(
            imports=self.imports, gpu=self.gpu, cpu_pinned=self.cpu, scaler=self.scaler,
            sharded_scaler=self.sharded_scaler or any(
                not r.level and r.name is not None and f"{r.module}.{r.name}" in SHARDED_GRAD_SCALERS
                for r in self.imports),
            mixed_precision=tuple(sorted(self.mixed)), training=training, rl=bool(anywhere & RL_PACKAGES),
            other_framework="" if "torch" in anywhere else min(anywhere & OTHER_FRAMEWORKS, default=""),
            sparse=self.sparse, native_kernels=self.native_kernels,
            checkpointing_method=any(isinstance(c, ast.ClassDef) and any(
                isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == CHECKPOINTING_METHOD
                for f in c.body) for c in self.tree.body),
            log_clamp_rounds_to_one=bool(names & LOG_NAMES) and (
                bool(names & CLAMP_NAMES) and log_clamp_rounds_to_one(self.tree, self.aliases.qualified)
                or bool(names & SIGMOID_NAMES) and log_one_minus_sigmoid(
                    self.tree, self.aliases.qualified, star=any(r.name == "*" for r in self.imports))),
            forward_overflows_float16=forward_overflows_float16(self.tree), extensions=tuple(sorted(self.extensions)),
            forward_index_puts_float32=bool(names & FLOAT32_FACTORY_NAMES)
            and forward_index_puts_float32(self.tree, self.aliases.qualified),
            forward_feeds_function_16_bit="apply" in names
            and forward_feeds_function_16_bit(self.tree, self.aliases.qualified),
            numpy_readers=numpy_readers(self.tree, self.aliases.qualified) if numpy_used else {},
            forward_reads_numpy=numpy_used and forward_reads_numpy(self.tree, self.aliases.qualified),
            bce_losses=bce_losses(self.tree, self.aliases.qualified) if names & BCE_NAMES else (),
            jax=bool(roots & JAX_PACKAGES), replaces_optimizers=bool(roots & OPTIMIZER_REPLACERS),
            parallelism=tuple(sorted(self.parallelism)), fused_sgd_momentum=self.fused_sgd,
            argparse_defaults=self._argparse_defaults(), dataclass_ints=self._dataclass_ints(),
            bool_flags=() if self.options_by_name else tuple(sorted(self.bool_flags - self.other_flags)),
            classes=classes,
            refs={name: tuple(sorted((used & top) - {name})) for name, used in refs.items() if (used & top) - {name}},
            optimizers=self._optimizers(), names=tuple(sorted(names)) if training else (),
            dict_lookups=tuple(sorted(dict_lookups)),
            row_functions=tuple(n.name for n in self.tree.body
                                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _maps_rows(n))
            if "map" in names else (),  # `.map(...)` spells the attribute
            xla=bool(roots & XLA_PACKAGES) or any(
                ref.name is not None and ref.name.startswith("XLA") and ref.module.split(".", 1)[0] in _LIGHTNING
                for ref in self.imports),
            dtype_casts=_dtype_casts(self.tree) if names & {"to", "dtype"} else {},
            unpinned_collates=self._unpinned_collates(),
            device_collates=_device_collates(self.tree, self.aliases, self.mover_lines)
            if self.mover_lines else (),  # what _moves_to_device needs
            checkpoint_getters=_checkpoint_getters(self.tree, self.aliases) if "checkpoint" in names or any(
                CHECKPOINT in targets for targets in self.aliases.table.values()) else (),
            devices=tuple(sorted(self.devices)), device_moved=self.device_moved,
            version_flags=_version_flags(self.tree) if versioned or "hasattr" in names
            or any("torch_version" in n.lower() for n in names) else (),
            factories=_factories(self.tree, classes,
                                 frozenset(r.local for r in self.imports if r.name not in (None, "*"))),
            config_ints={k: tuple(sorted(set(v))) for k, v in self.config.items()},
            step_rows=step_rows(self.tree) if training and not DATASET_CALLS.isdisjoint(names | aliased) else None,
            image_rows=image_rows(self.tree) if training and not IMAGE_SET_CALLS.isdisjoint(names) else None,
            unreached=unreached_functions(self.tree) if training else (),
            uncalled_methods=uncalled_methods(self.tree, plain) if training else (),
            plain_classes=plain,
            env_calls=env_calls(self.tree, self.aliases.qualified, frozenset(imported))
            if names & ENV_METHODS and ("make" in names or any(env_named(n) for n in names)) else (),
            private_attributes=tuple(sorted(private_attributes)),
            private_strings=tuple(sorted(private_strings)),
            torch_ceiling=torch_ceiling(self.tree, self.aliases, names, data_zero, iterator_next),
            iterator_next=iterator_next,
            loader_functions=loader_functions(self.tree, self.loader_lines, self._is_loader, self.return_lines)
            if self.loader_lines else (),
            cpp14_build=self.cpp14_build, cpp14_extensions=tuple(sorted(self.cpp14_extensions)),
            import_alternatives=import_alternatives(self.tree.body, _refs_of),
            conditional_imports=conditional_imports(self.tree.body, _refs_of),
            script_ceiling=version_ceiling(main.body, self.aliases) if main is not None and "__version__" in names
            else None,
            builds_ffi_extension=self.ffi_extension,
            defines_only=_defines_only(self.tree),
            legacy_torch=legacy_torch(self.tree) if data_zero or "pack_padded_sequence" in names else "",
            inference_script=main is not None and grad_off and not may_train,
            grad_off=grad_off,
            may_train=may_train,
            hf_trainers=hf_trainers,
            settings=tuple(sorted(self.settings)),
            option_values=self._option_values(),
            class_calls=dict(sorted(self.class_calls.items())),
            option_defaults=self._option_defaults(),
            freezes_modules=self.grad_flags and _freezes_modules(self.tree),
            moved_results=moved,
            member_moves=member_moves(self.tree, self.loops) if self.loops and names & {"to", "cuda"} else {},
            parameter_moves=parameter_moves(self.tree, self.loops) if self.loops and names & {"to", "cuda"}
            else {},
            method_moves=method_moves(self.tree, self.copy_lines) if self.copy_lines else {},
            cuda_devices=cuda_devices(self.tree) if self.gpu else (),
            imported_device_targets=tuple(sorted(self.device_targets)),
            cuda_returns=cuda_returns(self.tree) if self.gpu and (
                self.device_setattr or any(device_word(attr) for attr in stored)) else (),
            returned_device_targets=_returned_device_targets(self.tree, self.local_device_targets, imported)
            if self.local_device_targets else {},
            self_devices=self_devices(self.tree) if self.self_device_bound else {},
            self_device_copies=self_device_copies(self.tree) if self.self_device_copied else {},
            init_moves=init_moves(self.tree, self.aliases.qualified, plain)
            if plain and ("cuda" in names or self.self_device_bound and "to" in names) else {},
            lazy_imports=_lazy_imports(self.tree) if self.lazy else (),
            source=source,
        )

    def _assign(self, node: ast.Assign) -> None:
        if not self.self_device_bound and any(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                and device_word(t.attr) for t in node.targets):
            self.self_device_bound = True
        if any(isinstance(t, ast.Subscript) and _holds_options(t.value) for t in node.targets):
            self.options_by_name = True  # `vars(args)[key] = value`
        if isinstance(node.value, ast.Call):  # `train_loader = get_loader(...)`: a function's result, not a class's
            root = dotted(node.value.func)
            if root is not None and not any(part[:1].isupper() for part in root.split(".")) \
                    and root.split(".", 1)[0] not in LIBRARY_ROOTS:
                for target in node.targets:
                    for element in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                        if isinstance(element, ast.Name):
                            self._call_results[element.id] = root.split(".", 1)[0]
        if _assigns_device_index(node):
            self.gpu = True  # `device = 0`: a CUDA device index
        elif _hides_every_gpu(node):
            self.cpu = True  # `os.environ["CUDA_VISIBLE_DEVICES"] = ""`: the process sees no GPU (blind17: vgae)
        elif _string(node.value) == "cpu":
            for target in node.targets:
                label = target.id if isinstance(target, ast.Name) else (
                    target.attr if isinstance(target, ast.Attribute) else "")
                if "device" in label.lower():
                    self.cpu = True
        for target in node.targets:
            if isinstance(target, ast.Attribute) and not (isinstance(target.value, ast.Name)
                                                          and target.value.id in ("self", "cls")):
                self._option(target.attr, node.value)  # `config.flash_attn = True` (not a class's own `self.x`)
            elif isinstance(target, ast.Attribute) and CHECKPOINT_OPTION.search(target.attr):
                # a class's own checkpointing switch counts: a subclass elsewhere may turn on its base's flag
                self._option(target.attr, node.value)
            elif isinstance(target, ast.Subscript):
                key = _string(target.slice)
                if key is not None:
                    self._option(key, node.value)  # `cfg["use_flash_attn"] = True`

    def _option(self, name: str, value: ast.AST) -> None:
        """Remember what the file gives an option named like a fused-attention or checkpointing switch."""
        if not FUSED_OPTION.search(name) and not CHECKPOINT_OPTION.search(name):
            return
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            self.passed_args.append((name, value.attr))  # `flash=args.flash`: decided by the parser's default
            return
        literal = value.value if isinstance(value, ast.Constant) else ...
        if literal is True or (type(literal) is int and literal != 0):
            kind = OPTION_ON
        elif literal is False or literal is None or literal == 0:
            kind = OPTION_OFF
        else:
            kind = OPTION_UNKNOWN
        self.options.setdefault(name, set()).add(kind)

    def _option_values(self) -> dict[str, tuple[str, ...]]:
        """The options' values, `args.flash` read as the default of the argparse flag the file declares
        (a `store_true` flag: off unless the command line asks; True: on), unknown otherwise, and unknown
        wherever the file may rewrite the parsed arguments (`set_defaults`, `vars(args)`, `__dict__`, a
        computed setattr)."""
        for name, dest in self.passed_args:
            default = self.argparse.get(dest) if not self.args_rewritten else None
            kind = OPTION_OFF if default is False else OPTION_ON if default is True else OPTION_UNKNOWN
            self.options.setdefault(name, set()).add(kind)
        return {k: tuple(sorted(v)) for k, v in sorted(self.options.items())}

    def _class_call(self, call: ast.Call, last: str, qualified: set[str]) -> None:
        """The most positional arguments a call of a capitalised name passes (SPLAT: `*args`, `**kwargs`)."""
        if any(q.startswith("torch.") for q in qualified or self.aliases.qualified(call.func)):
            return  # torch's own classes: not a model's constructor
        splat = any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None and not _visible_dict(k.value) for k in call.keywords)
        count = SPLAT if splat else len(call.args)
        known = self.class_calls.get(last)
        if known != SPLAT and (known is None or count == SPLAT or count > known):
            self.class_calls[last] = count

    def _compiles(self, node: ast.Attribute) -> bool:
        """`torch.compile`, or `.compile` on an object (`model.compile()`, nn.Module.compile since 2.2);
        not another module's function (`re.compile`)."""
        qualified = self.aliases.qualified(node)
        return not qualified or "torch.compile" in qualified

    def _names_cudnn(self, node: ast.AST) -> bool:
        """`torch.backends.cudnn` through the imports, or any chain ending in `cudnn`."""
        if (isinstance(node, ast.Attribute) and node.attr == "cudnn") or (
                isinstance(node, ast.Name) and node.id == "cudnn"):
            return True
        return "torch.backends.cudnn" in self.aliases.qualified(node)

    def _unpinned_collates(self) -> tuple[str, ...]:
        body = self.tree.body
        if not any(isinstance(n, ast.ClassDef) and _is_batch_container(n) for n in body):
            return ()
        return tuple(n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))

    def _clip_half(self) -> bool:
        """A model bound from OpenAI CLIP's `clip.load(...)` (CLIP_LOADERS, through the imports) on a device
        that is not the literal "cpu", on which the file never calls `.float()` (by the name it is bound to:
        `model`, `self.model`): its weights stay float16. Asked only where the file imports `clip`."""
        loaded: set[str] = set()
        floated: set[str] = set()
        for node in all_nodes(self.tree):
            if isinstance(node, ast.Assign):
                value = node.value.value if isinstance(node.value, ast.Subscript) else node.value
                if not (isinstance(value, ast.Call) and self.aliases.qualified(value.func) & CLIP_LOADERS):
                    continue
                device = next((k.value for k in value.keywords if k.arg == "device"),
                              value.args[1] if len(value.args) > 1 else None)
                if device is not None and _string(device) == "cpu":
                    continue  # CLIP casts a model loaded on the CPU to float32 itself
                for target in node.targets:
                    model = target.elts[0] if isinstance(target, (ast.Tuple, ast.List)) and target.elts else target
                    name = dotted(model)
                    if name is not None:
                        loaded.add(name)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "float" \
                    and not node.args:
                name = dotted(node.func.value)
                if name is not None:
                    floated.add(name)
        return bool(loaded - floated)

    def _extension_aliases(self) -> dict[str, set[str]]:
        """Names the file binds to `CUDAExtension`/`CppExtension` (`extension = CUDAExtension`), with the
        classes they stand for; read only where the file imports from torch.utils.cpp_extension."""
        if not any(t.startswith(_CPP_EXTENSION) for targets in self.aliases.table.values() for t in targets):
            return {}
        out: dict[str, set[str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
                classes = self.aliases.qualified(node.value) & _EXTENSION_CLASSES
                if classes:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            out.setdefault(target.id, set()).update(classes)
        return out

    def _native(self, call: ast.Call, qualified: set[str]) -> None:
        """`cpp_extension.load(...)`/`load_inline(...)` builds native kernels here; `CUDAExtension("name", ...)`
        names a module the project compiles (resolved through the imports: `torch.load` is not one)."""
        if qualified & _JIT_BUILDERS:
            self.native_kernels = True
            self.cpp14_build = self.cpp14_build or pins_pre_cpp17(call, self.tree)
        elif qualified & _EXTENSION_CLASSES:
            named = [k.value for k in call.keywords if k.arg == "name"] + list(call.args[:1])
            name = _string(named[0]) if named else None
            if name:
                self.extensions.add(name)
                if pins_pre_cpp17(call, self.tree):
                    self.cpp14_extensions.add(name)

    # -- calls ----------------------------------------------------------------------------------
    def _is_loader(self, func: ast.expr) -> bool:
        """`func` names torch's DataLoader through the module's imports."""
        return bool(self.aliases.qualified(func) & DATALOADER)

    def _call(self, call: ast.Call) -> None:
        aliases = self.aliases
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        wanted = (last in _QUALIFIED_CALLS or (isinstance(func, ast.Name) and func.id in aliases.table)
                  or any(k.arg in ("mp_policy", "mixed_precision") for k in call.keywords))
        qualified = aliases.qualified(func) if wanted else set()
        if class_like(last):  # `Solver(config, train_loader)`: a class that may keep what it is handed
            handed = [a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)]
            root = dotted(func) if handed else None
            if root is not None and root.split(".", 1)[0] in aliases.table \
                    and not any(q.split(".", 1)[0] in LIBRARY_ROOTS for q in aliases.qualified(func)):
                self._handed_to_classes.append((root.split(".", 1)[0], handed))
        if last == "next" and not call.args and not call.keywords and isinstance(func, ast.Attribute):
            self.next_calls.append(call)
        elif last == "DataLoader":
            self.loader_lines.append(call.lineno)
        if last == "create_extension" and FFI_CREATE_EXTENSION in qualified:
            self.ffi_extension = True
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "sparse":
            self.sparse = True  # torch.sparse.mm(...)
        if last in ("load", "load_inline", "CUDAExtension", "CppExtension"):
            self._native(call, aliases.qualified(func))
        elif self._extension_names and isinstance(func, ast.Name) and func.id in self._extension_names:
            self._native(call, self._extension_names[func.id])
        for keyword in call.keywords:
            if keyword.arg == "device":
                self.device_keyword = True
                self.mover_lines.append(call.lineno)
            if keyword.arg == "dtype" and isinstance(keyword.value, ast.Subscript) and \
                    isinstance(keyword.value.slice, ast.Constant) and keyword.value.slice.value == "dtype":
                self._dtype_from_key = True  # `nn.Linear(d, d, dtype=cfg["dtype"])`
        if isinstance(func, ast.Attribute):
            attr = func.attr
            if attr == "to" and (call.args or call.keywords):  # `x.to(CFG.device)`: a device of an import
                targets = [kind[len(AT):] for kind in move_kinds(call) if kind.startswith(AT)]
                self.device_targets.update(t for t in targets if t.split(".", 1)[0] in aliases.table)
                self.local_device_targets.update(t for t in targets if t.count(".") == 1 and not t.startswith("self.")
                                                 and t.split(".", 1)[0] not in aliases.table)
                self.self_device_copied = self.self_device_copied or any(t.startswith("self.") for t in targets)
                self.device_moved = self.device_moved or any(_names_device(t) for t in (
                    *call.args[:1], *(k.value for k in call.keywords if k.arg == "device")))
            if attr == "cuda":
                self.gpu = True
            elif attr in _SPARSE_CALLS:
                self.sparse = True
            elif attr == "backward":
                self.backward = True
                value = func.value
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "scale":
                    self.scaler = True
                    self.mixed.add("grad-scaler")
            elif attr == "step":
                self.steps = True
            elif attr in ("half", "bfloat16") and not call.args:
                self.mixed.add("model-cast")
            elif attr == "from_pretrained" and any(
                    k.arg in ("torch_dtype", "dtype") and _is_dtype_16(k.value, aliases) for k in call.keywords):
                self.mixed.add("model-cast")  # a Hugging Face model loaded in 16 bits
            elif attr == "to":
                args = list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]
                if any(_is_dtype_16(a, aliases) for a in args):
                    self.mixed.add("model-cast")
                elif self._casts_to_input_dtype(call):
                    self.mixed.add("casts-weights")
                if any(isinstance(a, ast.Constant) and type(a.value) is int for a in call.args[:1]) \
                        or any(_names_rank(a) for a in call.args[:1]):
                    self.gpu = True  # `.to(0)`, `.to(local_rank)`: a CUDA device index
            elif attr == "add_argument":
                self._argparse(call)
            elif attr == "initialize" and isinstance(func.value, ast.Name) and func.value.id == "amp":
                self.mixed.add("apex")
        self._config_ints(call, func, qualified)
        for keyword in call.keywords:
            if keyword.arg is not None:
                self._option(keyword.arg, keyword.value)  # `Attention(dim, flash=True)`, `dict(use_sdpa=x)`
        if last[:1].isupper() and not last.endswith(("Error", "Exception", "Warning")):
            self._class_call(call, last, qualified)
        elif last == "setattr" and len(call.args) == 3:
            if _string(call.args[1]) is None:
                self.args_rewritten = True  # `setattr(args, key, value)` from a config file
                self.options_by_name = True
            else:
                self._option(_string(call.args[1]) or "", call.args[2])
                self.device_setattr = self.device_setattr or device_word(_string(call.args[1]) or "")
        elif last in ("set_defaults", "vars"):
            self.args_rewritten = True
            self.options_by_name = self.options_by_name or last == "set_defaults"
            if last == "set_defaults" and isinstance(func, ast.Attribute):
                for keyword in call.keywords:
                    if keyword.arg is not None:
                        self._set_defaults[keyword.arg] = _default_literal(keyword.value)
        elif last == "update" and isinstance(func, ast.Attribute) and _holds_options(func.value):
            self.options_by_name = True  # `args.__dict__.update(config)`, `vars(args).update(config)`
        elif last in (HF_CHECKPOINTING_ENABLE, "enable_gradient_checkpointing") and isinstance(func, ast.Attribute):
            self.options.setdefault(HF_CHECKPOINTING_FLAG, set()).add(OPTION_ON)
        if last in _FRAMEWORK_DEVICE_CALLS and any(
                q.startswith(("accelerate", "deepspeed", "lightning", "pytorch_lightning")) for q in qualified):
            self.devices.add("framework")  # Accelerator(), deepspeed.initialize(), Trainer/Fabric: device chosen for us
        first = call.args[0] if call.args else None
        moves_to = isinstance(func, ast.Attribute) and func.attr == "to"
        if _string(first) == "cpu" and (qualified & {"torch.device"} or moves_to):
            self.cpu = True
        for keyword in call.keywords:
            if keyword.arg in ("device", "accelerator") and _string(keyword.value) == "cpu":
                self.cpu = True
            if keyword.arg == "device_ids":
                self.gpu = True
            elif keyword.arg == "device" and isinstance(keyword.value, ast.Constant) \
                    and type(keyword.value.value) is int:
                self.gpu = True
            elif keyword.arg in ("mp_policy", "mixed_precision") and not _is_none(keyword.value):
                if any(q.startswith("torch.distributed") for q in qualified):
                    self.mixed.add("fsdp-mixed-precision")
        if not qualified:
            return
        if qualified & OPTIMIZER_CLASSES:
            self.optimizer_made = True
            if any(q.endswith("SGD") for q in qualified):
                keywords = {k.arg: k.value for k in call.keywords if k.arg}
                fused = keywords.get("fused")
                momentum = keywords.get("momentum", call.args[2] if len(call.args) > 2 else None)
                zero = isinstance(momentum, ast.Constant) and momentum.value in (0, 0.0)
                if fused is not None and not _is_none(fused) and not (
                        isinstance(fused, ast.Constant) and fused.value is False) and momentum is not None and not zero:
                    self.fused_sgd = True
        if qualified & FSDP_WRAPPERS:
            self.parallelism.add("fsdp")
        if qualified & TENSOR_PARALLEL:
            self.parallelism.add("tensor-parallel")
        if qualified & DATA_PARALLEL:
            self.parallelism.add("data-parallel")  # single-process replicas: autocast's dtype is not carried over
        if qualified & GRAD_SCALERS:
            self.scaler = True
            self.sharded_scaler = self.sharded_scaler or bool(qualified & SHARDED_GRAD_SCALERS)
            self.mixed.add("grad-scaler")
        elif qualified & AUTOCASTS:
            self.mixed.add("autocast")
        elif qualified & FSDP_MIXED_PRECISION:
            self.mixed.add("fsdp-mixed-precision")
        elif qualified & {"torch.set_default_dtype"} and call.args and _is_dtype_16(call.args[0], aliases):
            self.mixed.add("default-dtype")
        elif qualified & {"torch.device"} and call.args and isinstance(call.args[0], ast.Constant) \
                and type(call.args[0].value) is int:
            self.gpu = True  # torch.device(0)
        elif any(q.startswith("deepspeed.initialize") for q in qualified):
            self.mixed.add("deepspeed")

    def _config_ints(self, call: ast.Call, func: ast.AST, qualified: set[str]) -> None:
        """Integers passed by keyword to a class or `dict(...)` (`ModelArgs(n_layers=6)`): configuration."""
        last = _last_name(func)
        if not (last == "dict" or last[:1].isupper()) or any(q.startswith("torch.") for q in qualified):
            return
        for keyword in call.keywords:
            if keyword.arg is None:
                continue
            value = keyword.value
            number = value.value if isinstance(value, ast.Constant) else (
                self.module_ints.get(value.id) if isinstance(value, ast.Name) else None)
            if type(number) is int:
                self.config.setdefault(keyword.arg, []).append(number)

    def _casts_to_input_dtype(self, call: ast.Call) -> bool:
        """`self.weight.to(dtype=x.dtype)` / `w.to(x.dtype)`: a layer computing in its input's dtype."""
        target = call.func.value  # type: ignore[attr-defined]
        if not (isinstance(target, ast.Attribute) and target.attr in ("weight", "bias")):
            return False
        args = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "dtype"]
        return any(isinstance(a, ast.Attribute) and a.attr == "dtype" for a in args)

    def _argparse(self, call: ast.Call) -> None:
        flags = [_string(a) for a in call.args]
        dest = next((_string(k.value) for k in call.keywords if k.arg == "dest"), None)
        if dest is None:
            longs = [f for f in flags if f and f.startswith("--")]
            shorts = [f for f in flags if f and f.startswith("-")]
            chosen = longs[0] if longs else (shorts[0] if shorts else (flags[0] if flags and flags[0] else None))
            if chosen is None:
                return
            dest = chosen.lstrip("-").replace("-", "_")
        action = next((_string(k.value) for k in call.keywords if k.arg == "action"), None)
        default = next((k.value for k in call.keywords if k.arg == "default"), None)
        if action in ("store_true", "store_false") and (default is None or isinstance(_literal(default), bool)):
            self.bool_flags.add(dest)  # parsed as a bool, whatever the command line says
        else:
            self.other_flags.add(dest)
        for keyword in call.keywords:
            if keyword.arg == "default":
                self.argparse[dest] = _default_literal(keyword.value)
                self._no_default.discard(dest)
                return
        if any(_string(k.value) == "store_true" for k in call.keywords if k.arg == "action"):
            self.argparse[dest] = False
        else:
            if dest not in self.argparse or dest in self._no_default:
                self._no_default.add(dest)
            self.argparse.setdefault(dest, None)

    def _argparse_defaults(self) -> dict[str, Any]:
        """The options' defaults: `add_argument`'s, and `set_defaults`' for dests no option declares or that
        options declare without `default=` (argparse gives such an option the parser's default, whichever
        comes first). Where both give a dest different values, which one the parser keeps depends on their
        order: None (unknown)."""
        out = dict(self.argparse)
        for dest, value in self._set_defaults.items():
            if dest not in out or (dest in self._no_default and out[dest] is None):
                out[dest] = value
            elif out[dest] != value:
                out[dest] = None
        return out

    # -- classes --------------------------------------------------------------------------------
    def _classes(self) -> dict[str, ClassFacts]:
        """Every class of the file: top-level ones by name, nested ones by their `__qualname__`
        ("train.<locals>.Frames"): a Dataset defined inside the training function is read too."""
        nodes = {qualname: node for qualname, node in _all_classes(self.tree)}
        local = frozenset(q for q in nodes if "." not in q)
        imported = {ref.local: "." * ref.level + (f"{ref.module}.{ref.name}" if ref.module else ref.name)
                    for ref in self.imports if ref.name not in (None, "*")}
        out = {q: self._class(node, local, imported) for q, node in nodes.items()}
        changed = True  # a subclass of a module class of the file is a module class
        while changed:
            changed = False
            for name, found in out.items():
                if not found.module and any(out.get(b) is not None and out[b].module for b in found.bases):
                    out[name] = replace(found, module=True)
                    changed = True
        nets = convnet_classes({q: (nodes[q], f.layers) for q, f in out.items() if f.module and "." not in q})
        return {q: replace(f, convnet=True) if q in nets else f for q, f in out.items()}

    def _class(self, node: ast.ClassDef, local: frozenset[str] = frozenset(),
               imported: Optional[dict[str, str]] = None) -> ClassFacts:
        for statement in node.body:  # `use_checkpoint = True` in a class body: a subclass may turn on its base's
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name) and CHECKPOINT_OPTION.search(target.id):
                        self._option(target.id, statement.value)
        bases: list[str] = []
        for base in node.bases:
            qualified = sorted(self.aliases.qualified(base))
            if qualified:
                bases.extend(qualified)
            elif isinstance(base, ast.Name):
                bases.append(base.id)
            elif isinstance(base, ast.Attribute):
                bases.append(base.attr)
        is_dataset = any(b in DATASET_BASES or b.endswith("Dataset") for b in bases)
        if not is_dataset:
            module = any(b.startswith("torch.nn.") for b in bases) or any(
                b not in _PLAIN_BASES and not b.startswith(("torch.utils.data", "typing.", "enum.", "abc."))
                and b not in local for b in bases)  # an unread base may be a module: its width is unknown
            if not module and not any(b in local for b in bases):
                return ClassFacts(tuple(bases))
            layers, params, defaults = class_layers(node, self.aliases.qualified, local, imported or {},
                                                    self.module_ints)
            # a quantum simulator's module base (`tq.QuantumModule`) builds no layer with a width of its own
            inherited = [b for b in bases if not b.startswith("torch.nn.") and b not in _PLAIN_BASES
                         and not quantum_simulator((b,))]
            tensors = parameter_tensors(node, self.aliases.qualified, local, imported or {}) \
                if bases == ["torch.nn.Module"] else None
            weightless = bool(bases) and all(b == "torch.nn.Module" for b in bases) and weightless_class(node)
            if layers is None and weightless:
                layers = ()  # a forward and no __init__ over nn.Module itself: no weights (a decoder's dot product)
            if layers is not None and inherited:  # the base's own layers are not read: width unknown
                layers += tuple(Layer(OPAQUE, b) for b in inherited)
            return ClassFacts(tuple(bases), module=module, layers=layers, init_params=params,
                              init_defaults=tuple(sorted(defaults.items())),
                              head=_few_tensors(node, bases, layers),
                              tensors=tensors,
                              weightless=weightless or (layers == () and tensors == 0 and not params),
                              sigmoid_output=forward_returns_sigmoid(node, self.aliases.qualified))
        iterable = any(b in ITERABLE_BASES for b in bases)
        sharded = any(isinstance(n, (ast.Name, ast.Attribute)) and
                      (getattr(n, "id", None) == "get_worker_info" or getattr(n, "attr", None) == "get_worker_info")
                      for n in walk(node))
        kind, optional, plain = dataset_cost(node, self.aliases)
        return ClassFacts(tuple(bases), kind, iterable, sharded, passed_arguments(node),
                          bulk=decodes_bulk(node, self.aliases), item_io=reads_per_item(node, self.aliases),
                          token_ids=yields_token_ids(node, self.aliases.qualified),
                          optional_work=tuple(sorted(optional.values())), plain=plain,
                          plain_bulk=bool(optional) and decodes_bulk(node, self.aliases, skip=frozenset(optional)))

    def _dataclass_ints(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for node in self.tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                        and statement.value is not None:
                    value = _literal(statement.value)
                    if type(value) is int:
                        out.setdefault(statement.target.id, {})[node.name] = value
        return out

    def _option_defaults(self) -> dict[str, dict[str, bool]]:
        """`flash_attn: bool = False` / `use_sdpa = True` in a class body: field -> {class: default}."""
        out: dict[str, dict[str, bool]] = {}
        for node in _module_level(self.tree.body):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                target: ast.expr
                if isinstance(statement, ast.AnnAssign):
                    target, value = statement.target, statement.value
                elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target, value = statement.targets[0], statement.value
                else:
                    continue
                if isinstance(target, ast.Name) and FUSED_OPTION.search(target.id) \
                        and isinstance(value, ast.Constant) and type(value.value) is bool:
                    out.setdefault(target.id, {})[node.name] = value.value
        return out

    def _optimizers(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for node in self.tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            found = optimizer_classes_in(node.value, self.aliases)
            if found:
                out[node.targets[0].id] = found
        return out


_PLAIN_BASES = frozenset({
    "object", "Exception", "BaseException", "ValueError", "RuntimeError", "dict", "list", "tuple", "str", "int",
    "float", "set", "Enum", "IntEnum", "NamedTuple", "TypedDict", "ABC", "Protocol", "Generic", "Namespace",
})


# torch's grad-off contexts (core/torch_api.py reads this list: this layer sits below it), and their last names
GRAD_OFF = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
_GRAD_OFF_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in GRAD_OFF)
# names a file that trains uses (an optimizer, a framework's trainer): such a file is no inference script
# Hugging Face's trainers, as a class's bases spell them through the imports (ClassFacts.bases): a subclass of
# one fine-tunes as the trainer does (FileFacts.hf_trainers). Not a class the project calls Trainer itself
HF_TRAINERS = frozenset({"transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
                         "trl.SFTTrainer", "trl.DPOTrainer"})


def hf_trainer_classes(classes: dict[str, ClassFacts]) -> tuple[str, ...]:
    """The top-level classes of `classes` over one of HF_TRAINERS, directly or through another of them."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if "." not in name and name not in found and any(b in HF_TRAINERS or b in found for b in cls.bases):
                found.add(name)
                changed = True
    return tuple(sorted(found))


_TRAINING_NAMES = frozenset({"optim", "optimizer", "Trainer", "Runner", "backward", "fit", "train_step",
                             "training_step", "Accelerator", "Fabric", "initialize"})


def _main_guard(tree: ast.Module) -> Optional[ast.If]:
    """`if __name__ == "__main__":` at module level: the file is run as a script."""
    for statement in tree.body:
        if not isinstance(statement, ast.If):
            continue
        test = statement.test
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__" \
                and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators):
            return statement
    return None


def _defines_only(tree: ast.Module) -> bool:
    """Every top-level statement imports, defines a function or class, is a docstring, or binds a value with no
    call in it (`EPS = 1e-8`, `__all__ = [...]`), also inside a `try` whose every block is such statements (an
    optional import: `try: from apex.optimizers import FusedAdam; has_apex = True` / `except ImportError:
    has_apex = False`, VideoMAE's optim_factory.py): importing the module runs nothing of the project's."""
    return _only_definitions(tree.body)


def _only_definitions(body: list[ast.stmt]) -> bool:
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.Pass):
            continue
        if isinstance(statement, ast.Try) and all(
                _only_definitions(block) for block in (statement.body, statement.orelse, statement.finalbody,
                                                       *(h.body for h in statement.handlers))):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None \
                and not any(isinstance(n, ast.Call) for n in fast_walk(statement.value)):
            continue
        return False
    return True


def torch_ceiling(tree: ast.Module, aliases: Optional[_Aliases] = None,
                  names: Optional[set[str]] = None, data_zero: bool = True,
                  iterator_next: tuple[tuple[str, ...], ...] = ()) -> Optional[tuple[int, int]]:
    """The first torch release this module cannot run on, the lowest of these signals:

    - a module-level import, outside any `try` or `if`, of a module or name that release (or the torchtext
      released with it) removed, or of one under it (REMOVED_MODULES). In a notebook, a cell's top-level
      import is one of the module's;
    - a module-level assertion that torch's major version is below one (`assert torch.__version__.split('.')[0]
      == '1'`: torch 2.0; `version_ceiling`);
    - a fill with a uint8 mask the module makes (`fills_with_uint8_masks`): torch 2.1;
    - `loss.data[0]` of a loss the same function calls `.backward()` on (`reads_zero_dim_loss`): torch 1.0;
    - `.next()` on the iterator of a DataLoader the module builds (`iterator_next`, project/iter_next.py): 1.13.

    `names` (what the module mentions, when the caller knows) skips the walks that cannot find anything, and
    so does `data_zero` False (the caller saw no `<x>.data[0]` in the module)."""
    found: list[tuple[int, int]] = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            modules = [statement.module] + [f"{statement.module}.{a.name}" for a in statement.names]
        elif isinstance(statement, ast.Import):
            modules = [a.name for a in statement.names]
        else:
            continue
        found += [c for c in map(_removed, modules) if c is not None]
    if names is None or "__version__" in names:
        asserted = version_ceiling(tree.body, aliases or _Aliases(_imports(tree)))
        if asserted is not None:
            found.append(asserted)
    if (names is None or ("byte" in names and not names.isdisjoint(_MASK_FILLS))) and fills_with_uint8_masks(tree):
        found.append(UINT8_MASK_CEILING)
    if data_zero and (names is None or {"backward", "data"} <= names) and reads_zero_dim_loss(tree):
        found.append(ZERO_DIM_LOSS_CEILING)
    if (LOADER,) in iterator_next:
        found.append(NEXT_CEILING)
    return min(found) if found else None


def version_ceiling(statements: list[ast.stmt], aliases: _Aliases) -> Optional[tuple[int, int]]:
    """The first torch that one of `statements` refuses: an `assert` (or an `if` whose body ends by raising or
    `sys.exit(...)`) on torch's major version that admits none from some major on. A plain `if` that branches
    on the version tests it and refuses nothing. The forms read (`V` is `torch.__version__`, however imported):
    `V.split('.')[0] == '1'`, `int(V.split('.')[0]) < 2` (any comparison with an int), `V[0] == '1'`,
    `V.startswith('1.')`, `V < '2'` (or `'2.0'`: a string comparison reads only a one-digit major), each
    negated or with its operands swapped; `assert V.split('.')[0] == '1'` gives torch 2.0. Any other test of
    the version (a minor version, `version.parse`) gives nothing."""
    found: list[tuple[int, int]] = []
    for statement in statements:
        if isinstance(statement, ast.Assert):
            bound = _major_bound(statement.test, aliases)
        elif isinstance(statement, ast.If) and statement.body and _stops(statement.body[-1]):
            bound = _major_bound(statement.test, aliases)
            bound = None if bound is None else (_NEGATED[bound[0]], bound[1])
        else:
            continue
        if bound is not None and bound[0] in ("==", "<", "<="):
            major = bound[1] + (0 if bound[0] == "<" else 1)
            found.append((major, 0))
    return min(found) if found else None


_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", "<=": ">", ">": "<="}
_SWAPPED = {"==": "==", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
_COMPARISONS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_TORCH_VERSIONS = frozenset({"torch.__version__", "torch.version.__version__"})


def _stops(statement: ast.stmt) -> bool:
    """`raise ...`, `sys.exit(...)`, `exit()`, `quit()`: the program goes no further."""
    if isinstance(statement, ast.Raise):
        return True
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and dotted(call.func) in ("sys.exit", "exit", "quit", "os._exit")


def _major_bound(test: ast.expr, aliases: _Aliases) -> Optional[tuple[str, int]]:
    """(op, major) when `test` holds exactly when torch's major version `op` major (`("==", 1)` for
    `torch.__version__.split('.')[0] == '1'`); None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _major_bound(test.operand, aliases)
        return None if inner is None else (_NEGATED[inner[0]], inner[1])
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith" \
            and len(test.args) == 1 and not test.keywords and _torch_version(test.func.value, aliases):
        prefix = _string(test.args[0]) or ""
        return ("==", int(prefix[0])) if re.fullmatch(r"\d\.?", prefix) else None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS):
        return None
    op, left, right = _COMPARISONS[type(test.ops[0])], test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        op, left, right = _SWAPPED[op], right, left
    if not isinstance(right, ast.Constant):
        return None
    value = right.value
    if _torch_version(left, aliases):  # `torch.__version__ < '2'`: a string comparison, one digit read
        match = re.fullmatch(r"(\d)(?:\.0){0,2}", value) if isinstance(value, str) else None
        return (op, int(match.group(1))) if match and op in ("<", ">=") else None
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "int" \
            and len(left.args) == 1 and not left.keywords and _major_text(left.args[0], aliases):
        return (op, value) if type(value) is int else None
    if _major_text(left, aliases) and isinstance(value, str) and re.fullmatch(r"\d", value):
        return (op, int(value)) if op in ("==", "!=") else None
    return None


def _major_text(node: ast.expr, aliases: _Aliases) -> bool:
    """torch's major version as text: `torch.__version__.split('.')[0]` or `torch.__version__[0]`."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0
            and type(node.slice.value) is int):
        return False
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "split" \
            and value.args and _string(value.args[0]) == "." and len(value.args) <= 2 and not value.keywords:
        value = value.func.value
    return _torch_version(value, aliases)


def _torch_version(node: ast.expr, aliases: _Aliases) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and bool(aliases.qualified(node) & _TORCH_VERSIONS)


# masked_fill takes a boolean mask only since torch 2.1 (pytorch#96594); a uint8 mask warned from 1.2 on
UINT8_MASK_CEILING = (2, 1)
_MASK_FILLS = frozenset({"masked_fill", "masked_fill_"})
_Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef]  # what binds names: a function, or the module


def fills_with_uint8_masks(tree: ast.Module) -> bool:
    """A `masked_fill`/`masked_fill_` of the module takes a mask the module made with `.byte()` (torch 2.1 raises
    "masked_fill_ only supports boolean masks"): the mask is such an expression (subscripts aside), a name whose
    last binding above the fill in its function is one, a parameter of that function that a call of the module
    hands such a name (by keyword to any function of the module with that parameter, by position to a function
    it names: `f(...)`, `self.f(...)`), or an attribute every assignment of the module gives one
    (`self.mask = ....byte()`). Transformer-XL's forward: `dec_attn_mask = torch.triu(...).byte()[:, :, None]`,
    handed down as `dec_attn_mask=`, then `attn_mask=`, to `attn_score.masked_fill(attn_mask[None, :, :, None],
    ...)`. A mask converted on the way (`.bool()`, `.to(torch.bool)`, `mask == 1`) is a boolean one."""
    scopes = _scopes(tree)
    functions = [owner for owner, _ in scopes if not isinstance(owner, ast.Module)]
    positional = {id(f): [a.arg for a in f.args.posonlyargs + f.args.args] for f in functions}
    parameters = {id(f): set(positional[id(f)]) | {a.arg for a in f.args.kwonlyargs} for f in functions}
    by_name: dict[str, list[Union[ast.FunctionDef, ast.AsyncFunctionDef]]] = {}
    for function in functions:
        by_name.setdefault(function.name, []).append(function)
    attributes: dict[str, set[bool]] = {}  # attribute -> whether each assignment gives it a `.byte()` tensor
    bindings: dict[int, dict[str, list[tuple[int, bool]]]] = {}  # scope -> name -> (line, a `.byte()` tensor)
    for owner, owned in scopes:
        made: set[int] = set()  # the Name nodes an assignment binds to a `.byte()` tensor
        for node in owned:
            if isinstance(node, ast.Assign):
                byte = _byte_tensor(node.value)
                made.update(id(t) for t in node.targets if byte and isinstance(t, ast.Name))
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        attributes.setdefault(target.attr, set()).add(byte)
        names = bindings.setdefault(id(owner), {})
        for node in owned:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.setdefault(node.id, []).append((node.lineno, id(node) in made))
    handed: set[tuple[int, str]] = set()  # (function, parameter) some call hands a uint8 mask

    def uint8(owner: _Scope, node: ast.expr, line: int) -> bool:
        while isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Attribute):
            return attributes.get(node.attr) == {True}
        if not isinstance(node, ast.Name):
            return _byte_tensor(node)
        above = [b for b in bindings[id(owner)].get(node.id, ()) if b[0] < line]
        if above:
            last = max(b[0] for b in above)
            return all(b[1] for b in above if b[0] == last)
        return (id(owner), node.id) in handed

    calls = [(owner, node) for owner, owned in scopes for node in owned if isinstance(node, ast.Call)]
    changed = True
    while changed:
        changed = False
        for owner, call in calls:
            receivers: set[tuple[int, str]] = set()
            for keyword in call.keywords:
                if keyword.arg and uint8(owner, keyword.value, call.lineno):
                    receivers.update((f, keyword.arg) for f, names in parameters.items() if keyword.arg in names)
            func = call.func
            callee, skip = (func.id, 0) if isinstance(func, ast.Name) else (func.attr, 1) if (
                isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self") \
                else ("", 0)
            for position, argument in enumerate(call.args if callee else ()):
                if isinstance(argument, ast.Starred):
                    break
                if uint8(owner, argument, call.lineno):
                    receivers.update((id(f), positional[id(f)][position + skip]) for f in by_name.get(callee, ())
                                     if position + skip < len(positional[id(f)]))
            if not receivers <= handed:
                handed |= receivers
                changed = True
    for owner, call in calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _MASK_FILLS):
            continue
        functional = isinstance(func.value, ast.Name) and func.value.id == "torch"  # torch.masked_fill(x, mask, v)
        mask = next((k.value for k in call.keywords if k.arg == "mask"), None)
        if mask is None and len(call.args) > int(functional):
            mask = call.args[int(functional)]
        if mask is not None and uint8(owner, mask, call.lineno):
            return True
    return False


def _scopes(tree: ast.Module) -> list[tuple[_Scope, list[ast.AST]]]:
    """Each function of the module, and the module, with the nodes it owns (not those of functions inside it)."""
    scopes: list[tuple[_Scope, list[ast.AST]]] = []
    pending: list[_Scope] = [tree]
    while pending:
        owner = pending.pop()
        owned: list[ast.AST] = []
        stack: list[ast.AST] = list(owner.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                pending.append(node)
                continue
            owned.append(node)
            stack.extend(children(node))
        scopes.append((owner, owned))
    return scopes


# indexing a 0-dim tensor warned in torch 0.4 ("will be an IndexError in PyTorch 0.5") and raises from 1.0 on
ZERO_DIM_LOSS_CEILING = (1, 0)


def reads_zero_dim_loss(tree: ast.Module) -> bool:
    """A function of the module (or its top level) indexes `loss.data[0]` (anywhere: `total_loss +=
    loss.data[0]`, `float(loss.data[0])`) where it calls `loss.backward()` without arguments and binds `loss`
    only as `loss = <loss call>` (`criterion(...)`, `self.loss_fn(...)`, `F.mse_loss(...)`: `_loss_callee`;
    not a parameter, not a tuple element, no `+=`). The backward call makes it one value (one element, or
    torch raises "grad can be implicitly created only for scalar outputs"), and a loss call returns that value
    as a 0-dim tensor since torch 0.4, so the read raises IndexError on torch 1.0 and every later one (checked
    on 2.13): the code runs only on an older torch. LSTNet's `loss = criterion(output * scale, Y * scale);
    loss.backward(); ...; total_loss += loss.data[0]`. Not evidence: `.data[0]` of any other tensor (a batch's
    first row); a module that passes a loss keyword that may keep one loss per element (`_keeps_elements`); a
    read or backward call under `try` or an `if` that tests a version."""
    if _keeps_elements(tree):
        return False
    guarded: set[int] = set()  # nodes under `try` or a version test: code that may be there for another torch
    for node in fast_walk(tree):
        if isinstance(node, ast.Try):
            guarded.update(id(n) for statement in node.body for n in fast_walk(statement))
        elif isinstance(node, ast.If) and _tests_version(node.test):
            guarded.update(id(n) for n in fast_walk(node))
    for owner, owned in _scopes(tree):
        backward: set[str] = set()
        read: set[str] = set()
        made: set[int] = set()  # the Name targets of `name = <loss call>`
        for node in owned:
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward" \
                    and isinstance(node.func.value, ast.Name) and not node.args and not node.keywords:
                backward.add(node.func.value.id)
            elif isinstance(node, ast.Subscript) and isinstance(base := _data_zero_base(node), ast.Name):
                read.add(base.id)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _loss_callee(node.value):
                made.update(id(t) for t in node.targets if isinstance(t, ast.Name))
        candidates = read & backward
        if not candidates:
            continue
        if not isinstance(owner, ast.Module):
            arguments = owner.args
            candidates -= {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                           arguments.vararg, arguments.kwarg) if a is not None}
        bindings: dict[str, list[bool]] = {}
        for node in owned:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id in candidates:
                bindings.setdefault(node.id, []).append(id(node) in made)
        if any(bindings.get(name) and all(bindings[name]) for name in candidates):
            return True
    return False


def _data_zero_base(node: ast.Subscript) -> Optional[ast.expr]:
    """`x` of `<x>.data[0]`, the pre-0.4 way to read a one-element tensor; None for any other subscript."""
    index, value = node.slice, node.value
    if isinstance(value, ast.Attribute) and value.attr == "data" and isinstance(index, ast.Constant) \
            and index.value == 0 and type(index.value) is int:
        return value.value
    return None


def _byte_tensor(node: ast.expr) -> bool:
    """`<tensor>.byte()`, subscripted or not (`torch.triu(ones, 1).byte()[:, :, None]`): a uint8 tensor."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "byte" \
        and not node.args and not node.keywords


def _removed(module: str) -> Optional[tuple[int, int]]:
    """REMOVED_MODULES' ceiling for a dotted name or for the nearest package above it that has one."""
    parts = module.split(".")
    return next((REMOVED_MODULES[m] for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1))
                 if m in REMOVED_MODULES), None)


# functions of torch.nn.functional that return a loss: 0-dim unless told `reduction="none"`
_LOSS_FUNCTIONS = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "kl_div",
                             "binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss"})
# what a loss keyword says when it reduces the loss to one value: `size_average` only picks sum or mean
_REDUCING = {"reduce": frozenset({True}), "reduction": frozenset({"mean", "sum", "elementwise_mean", "batchmean"})}


def _keeps_elements(tree: ast.Module) -> bool:
    """The module passes a loss keyword that may keep one loss per element (a tensor whose `.data[0]` is valid
    on any torch): `reduction=` other than a literal "mean"/"sum" (`"none"`, a variable), `reduce=` other than
    a literal True. `size_average=False` sums, whatever else it says, and keeps none."""
    return any(isinstance(node, ast.keyword) and node.arg in _REDUCING
               and not (isinstance(node.value, ast.Constant) and node.value.value in _REDUCING[node.arg]
                        and type(node.value.value) in (bool, str))
               for node in fast_walk(tree))


def _loss_callee(call: ast.Call) -> bool:
    """`criterion(...)`, `self.loss_fn(...)`, `F.cross_entropy(...)`, `nn.MSELoss()(...)`: returns a loss."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    lowered = name.lower()
    return "loss" in lowered or "criterion" in lowered or name in _LOSS_FUNCTIONS \
        or (isinstance(func, ast.Call) and _loss_callee(func))


def _loss_name(name: str, bound: set[str]) -> bool:
    """A name that holds one loss: bound from a loss call, or named so (`loss`, `loss_l`, `train_loss`; not
    `losses`, a collection)."""
    lowered = name.lower()
    return name in bound or ("loss" in lowered and not lowered.endswith("losses"))


def legacy_torch(tree: ast.Module) -> str:
    """Evidence that the module's code runs only on torch 0.4 or older, or "".

    Two signals. `scores, _ = pack_padded_sequence(...)`, which raises from torch 1.1 (`_unpacks_packed_sequence`).
    And `<loss>.data[0]`, the pre-0.4 way to read a loss (`loss.item()` since 0.4). Losses are
    0-dim tensors since torch 0.4, which warned that indexing one "will be an IndexError in PyTorch 0.5"; the
    next release, 1.0, raises it (and so does every torch since: checked on 2.13). `<loss>` is a name bound from
    a loss call (`loss_l, loss_c = criterion(out, targets)`) or named as one loss, or a whole-tensor reduction
    (`correct.sum().data[0]`, 0-dim whatever it reduces). Not evidence: `x.data[0]` on any other tensor (a 1-D
    tensor's first element, valid on every torch); a loss where the file passes a keyword that may keep one
    loss per element (`reduction="none"`, `reduce=False`: `_keeps_elements`); a read under `try` or an `if`
    that tests a version. Not evidence either: `Variable(x, volatile=True)`, which torch 0.4 through 2.x accept
    with a warning. (The certain case of the loss read, a loss the function calls `.backward()` on, is also a
    torch ceiling that reaches the modules importing this one: `reads_zero_dim_loss`.)"""
    bound: set[str] = set()
    for node in fast_walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _loss_callee(node.value):
            for target in node.targets:
                elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                bound.update(e.id for e in elements if isinstance(e, ast.Name))
    unreduced = _keeps_elements(tree)

    def signal(node: ast.Subscript) -> bool:
        base = _data_zero_base(node)
        if base is None:
            return False
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr in ("sum", "mean") \
                and not base.args and not base.keywords:
            return True
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        return bool(name) and not unreduced and _loss_name(name, bound)

    found: list[Union[ast.Subscript, ast.Assign]] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Try):
            pending.extend([*node.handlers, *node.orelse, *node.finalbody])  # the body may fail on purpose
            continue
        if isinstance(node, ast.If) and _tests_version(node.test):
            continue
        if (isinstance(node, ast.Subscript) and signal(node)) or \
                (isinstance(node, ast.Assign) and _unpacks_packed_sequence(node)):
            found.append(node)
        pending.extend(children(node))
    if not found:
        return ""
    first = min(found, key=lambda n: (n.lineno, n.col_offset))
    if isinstance(first, ast.Assign):
        return (f"line {first.lineno}: `{ast.unparse(first.targets[0])} = pack_padded_sequence(...)` unpacks a "
                "PackedSequence into two values (it has four since torch 1.1: a ValueError)")
    return f"line {first.lineno}: `{ast.unparse(first)}` indexes a 0-dim loss (an IndexError since torch 1.0)"


def _tests_version(test: ast.expr) -> bool:
    """An `if` test that names a version (`torch.__version__`, `TORCH_VERSION`): its branches may be kept for
    another torch."""
    return any((isinstance(n, ast.Name) and "version" in n.id.lower())
               or (isinstance(n, ast.Attribute) and "version" in n.attr.lower()) for n in fast_walk(test))


def _unpacks_packed_sequence(node: ast.Assign) -> bool:
    """`scores, _ = pack_padded_sequence(...)`: a PackedSequence had two fields up to torch 1.0, four since 1.1
    (sorted_indices, unsorted_indices), so this unpacking raises on every newer torch (the captioning tutorial
    of blind9). The table of floors has no symbol between 0.4 and 1.7, so the legacy floor (0.4) withholds what
    torch 1.0 lacks too."""
    if not (len(node.targets) == 1 and isinstance(node.value, ast.Call)):
        return False
    target, func = node.targets[0], node.value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "pack_padded_sequence" and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2 \
        and not any(isinstance(e, ast.Starred) for e in target.elts)


def unreached_functions(tree: ast.Module) -> tuple[str, ...]:
    """Top-level functions nothing in the file reaches: not called or referenced (as a name, an attribute
    or a string) from module-level code, a class, a decorated function or a function that is reached.
    Empty when the file dispatches dynamically (`fire.Fire()`, `globals()[name]`, `sys.modules`, `exec`)."""
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not functions:
        return ()
    mentioned: dict[str, set[str]] = {}  # function -> the names its body mentions
    reached: set[str] = set()
    pending: list[str] = []

    Name, Attribute, Constant, Call = ast.Name, ast.Attribute, ast.Constant, ast.Call

    def mentions(root: ast.AST, into: set[str]) -> bool:
        """Collect the names `root` mentions; False when it dispatches by a computed name."""
        for node in fast_walk(root):
            kind = type(node)  # (parsed trees hold no subclasses of these node types)
            if kind is Name:
                into.add(node.id)  # type: ignore[attr-defined]
            elif kind is Attribute:
                into.add(node.attr)  # type: ignore[attr-defined]
                owner = node.value  # type: ignore[attr-defined]
                if node.attr == "modules" and isinstance(owner, Name) and owner.id == "sys":  # type: ignore[attr-defined]
                    return False
            elif kind is Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and value.isidentifier():
                    into.add(value)  # `getattr(module, "train")`, `__all__`, registries by name
            elif kind is Call:
                func = node.func  # type: ignore[attr-defined]
                name = func.attr if isinstance(func, Attribute) else func.id if isinstance(func, Name) else ""
                if name in DYNAMIC_CALLS or (isinstance(func, Name) and name in DYNAMIC_BUILTINS):
                    return False
        return True

    roots: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body: set[str] = set()
            header = statement.decorator_list + [d for d in statement.args.defaults + statement.args.kw_defaults
                                                 if d is not None]
            for part in header:
                if not mentions(part, roots):
                    return ()
            if not all(mentions(inner, body) for inner in statement.body):
                return ()
            mentioned[statement.name] = body
            if statement.decorator_list:  # registered somewhere (a CLI command, a hydra entry point, a hook)
                pending.append(statement.name)
        elif not mentions(statement, roots):
            return ()
    pending += [name for name in functions if name in roots]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        pending += [other for other in mentioned.get(name, ()) if other in functions and other not in reached]
    return tuple(sorted(set(functions) - reached))


def _all_classes(tree: ast.Module) -> Iterator[tuple[str, ast.ClassDef]]:
    """Every class with its `__qualname__`: `Outer.Inner`, `train.<locals>.Frames`."""
    # Only statements hold classes, and expressions hold no statements (a lambda's body is an expression):
    # the walk follows the fields that hold statements, and the clauses (`except`, `case`) that do, in
    # ast.iter_child_nodes' order, so the classes come in the order a walk of every node finds them.
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    fields_of = _STATEMENT_FIELDS
    while stack:
        prefix, node = stack.pop()
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f in _STATEMENT_FIELD_NAMES)
        for name in fields:
            for child in getattr(node, name, None) or ():
                if isinstance(child, ast.ClassDef):
                    qualname = prefix + child.name
                    yield qualname, child
                    stack.append((qualname + ".", child))
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    stack.append((f"{prefix}{child.name}.<locals>.", child))
                elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    stack.append((prefix, child))


# the fields of a node that list statements, or clauses that hold them (`handlers`, `cases`)
_STATEMENT_FIELD_NAMES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_STATEMENT_FIELDS: dict[type, tuple[str, ...]] = {}


def _module_ints(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound once to an integer literal (`n_layer = 12`, `HIDDEN = 64`, `V, C = 12, 32`)."""
    found: dict[str, list[object]] = {}
    for node in _module_level(tree.body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(_literal(node.value))
                elif isinstance(target, (ast.Tuple, ast.List)):
                    # each name its element of a literal of the same length; any other unpacking binds it unknown
                    elements = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) \
                        and len(node.value.elts) == len(target.elts) else [None] * len(target.elts)
                    for left, right in zip(target.elts, elements):
                        name = left.value if isinstance(left, ast.Starred) else left
                        if isinstance(name, ast.Name):
                            value = None if right is None or isinstance(left, ast.Starred) else _literal(right)
                            found.setdefault(name.id, []).append(value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.setdefault(node.target.id, []).append(_literal(node.value))
    return {name: values[0] for name, values in found.items()
            if len(values) == 1 and isinstance(values[0], int) and not isinstance(values[0], bool)}


def _reads_torch_version(node: ast.AST, flags: set[str]) -> bool:
    """`node` reads torch's version (`torch.__version__`, a `*torch_version*` name, a flag) or probes torch
    for an attribute (`hasattr(torch, "compile")`, `hasattr(torch.amp, "GradScaler")`)."""
    for child in walk(node):
        if isinstance(child, ast.Attribute) and child.attr == "__version__":
            return True
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "hasattr" \
                and child.args and _root_name(child.args[0]) == "torch":
            return True
        name = child.id if isinstance(child, ast.Name) else child.attr if isinstance(child, ast.Attribute) else ""
        if name and (name in flags or "torch_version" in name.lower()):
            return True
    return False


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _target_names(target: ast.AST) -> list[str]:
    """Names an assignment target binds: `flag`, and each name of `major, minor = ...`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _target_names(element)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _version_flags(tree: ast.Module) -> tuple[str, ...]:
    """Module-level names computed from torch's version, or from other such names (`TORCH_2 =
    version.parse(torch.__version__) >= version.parse("2.0")`, `NEW_AMP = TORCH_2 and cuda`,
    `major, minor = (int(v) for v in torch.__version__.split(".")[:2])`, `PT2 = hasattr(torch, "compile")`),
    top-level functions whose every `return` computes one (`def new_amp(): return version.parse(...)`), and
    attributes assigned one anywhere (`self.new_amp = ...`: tested as `if self.new_amp:`)."""
    flags: set[str] = set()
    assignments = [n for n in _module_level(tree.body) if isinstance(n, (ast.Assign, ast.AnnAssign))
                   and n.value is not None]
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    changed = True
    while changed:
        changed = False
        for node in assignments:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [name for t in targets for name in _target_names(t) if name not in flags]
            if names and _reads_torch_version(node.value, flags):  # type: ignore[arg-type]
                flags.update(names)
                changed = True
        for function in functions:
            if function.name in flags:
                continue
            returns = [r.value for r in _own_body_nodes(function) if isinstance(r, ast.Return)]
            if returns and all(r is not None and _reads_torch_version(r, flags) for r in returns):
                flags.add(function.name)
                changed = True
    for found in fast_walk(tree):  # `self.new_amp = version.parse(torch.__version__) >= ...` in a method
        if isinstance(found, ast.Assign) and any(isinstance(t, ast.Attribute) for t in found.targets) \
                and _reads_torch_version(found.value, flags):
            flags.update(t.attr for t in found.targets if isinstance(t, ast.Attribute))
    return tuple(sorted(flags))


def _factories(tree: ast.Module, classes: dict[str, ClassFacts], imported: frozenset[str] = frozenset()
               ) -> dict[str, str]:
    """Top-level functions whose every return builds one dataset class of the file (module-level or
    defined in the function itself), or one class the file imports by name (`name`, resolved by the
    project view): function name -> the class's key."""
    out: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        returned: set[str] = set()
        for child in _own_body_statements(node):
            if isinstance(child, ast.Return):
                value = child.value
                if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
                    returned.add("")
                    continue
                name = value.func.id
                key = f"{node.name}.<locals>.{name}" if f"{node.name}.<locals>.{name}" in classes else name
                if key in classes:
                    returned.add(key if classes[key].dataset is not None else "")
                else:
                    returned.add(name if name in imported and name[:1].isupper() else "")
        if len(returned) == 1 and "" not in returned:
            out[node.name] = returned.pop()
    return out


def _own_body_statements(fn: ast.AST) -> Iterator[ast.AST]:
    """The statements `_own_body_nodes` yields (a `return` is one), without walking the expressions, which
    hold none: the function's body, and the blocks under its statements but nested definitions (those
    directly in the body are read through, as `_own_body_nodes` reads them)."""
    stack: list[ast.AST] = list(getattr(fn, "body", []))
    fields_of = _STATEMENT_FIELDS
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f in _STATEMENT_FIELD_NAMES)
        for name in fields:
            for child in getattr(node, name, None) or ():
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)) and not isinstance(
                        child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    stack.append(child)


def _own_body_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    return own_nodes(getattr(fn, "body", []))


def optimizer_classes_in(value: ast.AST, aliases: _Aliases) -> tuple[str, ...]:
    """A torch optimizer class, or a dict literal whose values all are: the classes, else ()."""
    if isinstance(value, ast.Dict):
        found: list[str] = []
        for item in value.values:
            classes = optimizer_classes_in(item, aliases)
            if not classes:
                return ()
            found.extend(classes)
        return tuple(sorted(set(found)))
    qualified = aliases.qualified(value) & OPTIMIZER_CLASSES
    return tuple(sorted(qualified)) if len(qualified) == 1 else ()


def _visible_dict(node: ast.AST) -> bool:
    """`**{"k": v}` / `**dict(k=v)`: a splat whose keys the file shows (their values are recorded as given)."""
    if isinstance(node, ast.Dict):
        return all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
        and not node.args and all(k.arg is not None for k in node.keywords)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


# ------------------------------------------------------------------------------------------------
# what a Dataset's items cost

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def _methods(cls: ast.ClassDef) -> dict[str, FunctionNode]:
    return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _own_nodes(fn: Union[FunctionNode, ast.Lambda]) -> Iterator[ast.AST]:
    """The function's (or a lambda's) nodes, not descending into nested functions, lambdas or classes."""
    return own_nodes(fn.body if isinstance(fn.body, list) else [fn.body])


def _self_name(fn: FunctionNode) -> Optional[str]:
    params = fn.args.posonlyargs + fn.args.args
    return params[0].arg if params else None


def moves_to_device(fn: Union[FunctionNode, ast.Lambda], aliases: _Aliases,
                    calls_mover: Optional[Callable[[ast.Call], bool]] = None) -> bool:
    """The function's own code moves tensors to a device (`.cuda()`, `.to(device)`, a torch factory with
    `device=`), or makes a call `calls_mover` accepts (one of a function that does): the test that puts a
    Dataset's items, or a collate_fn's batches, on the GPU, where pinning raises and forked workers would
    re-initialise CUDA."""
    return any(isinstance(n, ast.Call) and (_moves_to_device(n, aliases) or (calls_mover is not None
                                                                               and calls_mover(n)))
               for n in _own_nodes(fn))


def _checkpoint_getters(tree: ast.Module, aliases: _Aliases) -> tuple[str, ...]:
    """FileFacts.checkpoint_getters: the top-level functions that return torch's checkpoint function and
    nothing else."""
    return tuple(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and checkpoint_getter(node, aliases.qualified) == ONLY_TORCH)


def _device_collates(tree: ast.Module, aliases: _Aliases, lines: list[int]) -> tuple[str, ...]:
    """Top-level functions that move tensors to a device in their own code or in a top-level function of the
    file they call by name (one level): as a collate_fn, they build batches on the GPU. `lines`: the lines of
    the calls that may move (`_Scanner.mover_lines`, in walk order); a function spanning none is not read."""
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    ordered = sorted(lines)
    direct = {fn.name for fn in functions if spans_any(fn, ordered) and moves_to_device(fn, aliases)}
    if not direct:
        return ()
    return tuple(fn.name for fn in functions if fn.name in direct or moves_to_device(
        fn, aliases, lambda call: isinstance(call.func, ast.Name) and call.func.id in direct))


def dataset_kind(cls: ast.ClassDef, aliases: _Aliases) -> str:
    """What one item of the dataset costs, judged from `__init__` and `__getitem__` / `__iter__`."""
    return dataset_cost(cls, aliases)[0]


def dataset_cost(cls: ast.ClassDef, aliases: _Aliases) -> tuple[str, dict[str, str], str]:
    """(`dataset_kind`, the optional callables its items call: attribute -> "<position>:<name>" of the
    constructor parameter, the kind of items made without them). The work of a dataset whose only per-item
    work is calling a constructor argument that defaults to None (`transform=None`, `t=None`) depends on the
    call that builds it: the kind is WORK, and the loader's call says whether it passes one."""
    methods = _methods(cls)
    if any(b in ("torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset")
           for b in (q for base in cls.bases for q in aliases.qualified(base))):
        return IN_MEMORY, {}, ""
    for name in ("__init__", "__getitem__", "__iter__", "__getitems__"):
        fn = methods.get(name)
        if fn is not None and moves_to_device(fn, aliases):
            return ON_DEVICE, {}, ""
    item = methods.get("__getitem__") or methods.get("__iter__")
    if item is None:
        return UNKNOWN, {}, ""
    me = _self_name(item)
    optional = _optional_callables(cls, methods)
    called: set[str] = set()
    work, indexes_data = _item_cost(item, me, methods, aliases, depth=0, seen={item.name}, optional=optional,
                                    called=called)
    plain = IN_MEMORY if indexes_data else NOTHING
    if work:
        return WORK, {}, ""
    if called:
        return WORK, {attr: optional[attr] for attr in sorted(called)}, plain
    return plain, {}, ""


def _optional_callables(cls: ast.ClassDef, methods: dict[str, FunctionNode]) -> dict[str, str]:
    """Attributes `__init__` binds once, to a parameter that defaults to None and is not rebound there
    (`self.T = t` for `t=None`), and that no other method binds: attribute -> "<position>:<name>"."""
    init = methods.get("__init__")
    if init is None:
        return {}
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    entries = {a.arg: f"{i - 1}:{a.arg}" for i, a in enumerate(positional) if i > 0}
    entries.update((a.arg, f"-1:{a.arg}") for a in args.kwonlyargs)
    none = {name for name, value in defaults.items() if _is_none(value) and name in entries}
    if not none:
        return {}
    me = _self_name(init)
    bound: dict[str, list[ast.AST]] = {}
    rebound: set[str] = set()
    for fn in methods.values():
        for node in _own_nodes(fn):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for each in walk(target):
                    if isinstance(each, ast.Attribute) and isinstance(each.value, ast.Name) \
                            and each.value.id == _self_name(fn):
                        bound.setdefault(each.attr, []).append(node if fn is init else target)
                    elif fn is init and isinstance(each, ast.Name) and isinstance(each.ctx, ast.Store):
                        rebound.add(each.id)
    out: dict[str, str] = {}
    for attr, nodes in bound.items():
        if len(nodes) != 1 or not isinstance(nodes[0], ast.Assign) or len(nodes[0].targets) != 1:
            continue
        value, target = nodes[0].value, nodes[0].targets[0]
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me \
                and isinstance(value, ast.Name) and value.id in none and value.id not in rebound:
            out[attr] = entries[value.id]
    return out


# libraries that decode images, audio, video or arrays: an item they make is worth pinning
_BULK_ROOTS = ("PIL.", "cv2.", "imageio.", "torchvision.io.", "torchvision.datasets.folder.", "torchaudio.",
               "librosa.", "soundfile.", "scipy.io.", "skimage.io.", "decord.", "av.", "h5py.", "tifffile.",
               "numpy.load", "torch.load", "SimpleITK.", "nibabel.")
_BULK_CALLS = frozenset({"imread", "read_image", "decode_image", "decode_jpeg", "default_loader", "pil_loader",
                         "load_image", "read_video", "load_audio", "read_audio", "load_wav"})


def _last_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _decodes(func: ast.AST, aliases: _Aliases) -> bool:
    """A call that decodes images, audio, video or arrays (a decoding library, or a decoder by its last name)."""
    return any(q.startswith(_BULK_ROOTS) for q in aliases.qualified(func)) or _last_name(func) in _BULK_CALLS


def decodes_bulk(cls: ast.ClassDef, aliases: _Aliases, skip: frozenset[str] = frozenset()) -> bool:
    """Items decode images, audio, video or arrays, or run a transform on them (`self.transform(img)`):
    batches big enough that a pinned copy is faster even when it stays synchronous. `skip`: attributes whose
    transform is left out (an optional one the constructor's call does not pass)."""
    for fn in _methods(cls).values():
        if fn.name in ("__init__", "__len__"):
            continue
        me = _self_name(fn)
        for node in _own_nodes(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if _decodes(func, aliases):
                return True
            if isinstance(func, ast.Attribute) and "transform" in func.attr.lower() and func.attr not in skip \
                    and isinstance(func.value, ast.Name) and func.value.id == me:
                return True  # `self.transform(image)`: a per-item transform of decoded data
    return _items_of_held_arrays(cls, aliases)


def _items_of_held_arrays(cls: ast.ClassDef, aliases: _Aliases) -> bool:
    """`__getitem__` takes its item from an attribute the class reads up front from an HDF5 file (`with
    h5py.File(path) as hf: self.features = np.array(hf.get("image_features"))`, then `self.features[a:b, :]`):
    the items are parts of a dense array held in memory (ban-vqa's 2048-d region features, blind24). Only HDF5,
    the container of feature and image arrays: a tensor `torch.load` or `np.load` reads up front may be token
    ids, which stay undecided."""
    methods = _methods(cls)
    item = methods.get("__getitem__")
    if item is None:
        return False
    held: set[str] = set()
    for fn in methods.values():
        me = _self_name(fn)
        files: set[str] = set()  # names bound to an open HDF5 file (`with h5py.File(p) as hf`)
        nodes = [n for n in _own_nodes(fn) if isinstance(n, (ast.withitem, ast.Assign))]
        for node in nodes + nodes:  # (in no particular order: twice, for the names bound before their reads)
            if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name) \
                    and _reads_hdf5(node.context_expr, aliases, files):
                files.add(node.optional_vars.id)
            elif isinstance(node, ast.Assign) and _reads_hdf5(node.value, aliases, files):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        files.add(target.id)
                    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == me:
                        held.add(target.attr)
    if not held:
        return False
    me = _self_name(item)
    return any(isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
               and isinstance(node.value.value, ast.Name) and node.value.value.id == me and node.value.attr in held
               for node in _own_nodes(item))


def _reads_hdf5(value: ast.expr, aliases: _Aliases, files: set[str]) -> bool:
    """An expression that calls h5py or reads a name bound to an open HDF5 file."""
    for node in walk(value):
        if isinstance(node, ast.Call) and any(q.startswith("h5py.") for q in aliases.qualified(node.func)):
            return True
        if isinstance(node, ast.Name) and node.id in files:
            return True
    return False


# calls that read a file per item, by the last name they spell (`open(path)`, `path.read_text()`, `pd.read_csv`)
_READ_CALLS = frozenset({"open", "load", "loadtxt", "fromfile", "memmap", "genfromtxt"})


def reads_per_item(cls: ast.ClassDef, aliases: _Aliases) -> bool:
    """An item (`__getitem__`, `__iter__`, `__getitems__` and the methods of the class they call) opens or
    reads a file, or decodes images, audio or arrays: the kind of per-item cost worker processes pay off
    for even outside training. A text conversion of a string held in memory is not."""
    methods = _methods(cls)
    todo = [methods[n] for n in ("__getitem__", "__iter__", "__getitems__") if n in methods]
    seen = {fn.name for fn in todo}
    while todo:
        fn = todo.pop()
        me = _self_name(fn)
        for node in _own_nodes(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if _decodes(func, aliases):
                return True
            last = _last_name(func)
            if last in _READ_CALLS or last.startswith("read"):
                return True
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me \
                    and last in methods and last not in seen and len(seen) < 8:
                seen.add(last)
                todo.append(methods[last])
    return False


def passed_arguments(cls: ast.ClassDef) -> tuple[str, ...]:
    """The constructor parameters an item holds as they were given: `self.x = x` in `__init__`, then
    `self.x`, `self.x[i]` or a local taken from them returned, yielded or stored into the item
    (`example["k"] = self.x`), in `__getitem__`/`__iter__` or a method they call."""
    methods = _methods(cls)
    init = methods.get("__init__")
    if init is None:
        return ()
    me = _self_name(init)
    positional = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    params = {name: f"{i}:{name}" for i, name in enumerate(positional)}
    params.update({a.arg: f"-1:{a.arg}" for a in init.args.kwonlyargs})
    stored: dict[str, str] = {}  # attribute -> parameter
    for node in _own_nodes(init):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        value = getattr(node, "value", None)
        pairs = [(t, value) for t in targets]
        if isinstance(value, ast.Tuple):  # `self.a, self.b = a, b`
            pairs = [(t, v) for target in targets if isinstance(target, ast.Tuple)
                     and len(target.elts) == len(value.elts) for t, v in zip(target.elts, value.elts)]
        for target, item in pairs:
            if isinstance(item, ast.Name) and item.id in params and isinstance(target, ast.Attribute) \
                    and isinstance(target.value, ast.Name) and target.value.id == me:
                stored[target.attr] = params[item.id]
    if not stored:
        return ()
    pending = [methods[n] for n in ("__getitem__", "__getitems__", "__iter__") if n in methods]
    seen = {fn.name for fn in pending}
    found: set[str] = set()
    while pending:
        fn = pending.pop()
        found.update(stored[attr] for attr in _placed_attributes(fn, _self_name(fn), set(stored)))
        for node in _own_nodes(fn):  # helpers the item methods call on self
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == _self_name(fn) \
                    and node.func.attr in methods and node.func.attr not in seen and len(seen) < 8:
                seen.add(node.func.attr)
                pending.append(methods[node.func.attr])
    return tuple(sorted(found))


def _placed_attributes(fn: FunctionNode, me: Optional[str], stored: set[str]) -> set[str]:
    """The stored attributes whose values `fn` returns, yields or stores into a container as they are."""
    def source(expr: ast.AST, locals_: dict[str, str]) -> Optional[str]:
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            return locals_.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == me \
                and expr.attr in stored:
            return expr.attr
        return None

    def placed(expr: Optional[ast.AST], locals_: dict[str, str]) -> set[str]:
        if expr is None:
            return set()
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(placed(e, locals_) for e in expr.elts))
        if isinstance(expr, ast.Dict):
            return set().union(*(placed(v, locals_) for v in expr.values))
        found = source(expr, locals_)
        return {found} if found else set()

    taken: dict[str, str] = {}  # locals assigned straight from a stored argument (`emb = self.emb[i]`)
    nodes = sorted(_own_nodes(fn), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    for node in nodes:
        if isinstance(node, ast.Assign):
            attr = source(node.value, taken)
            if attr is not None:
                taken.update((t.id, attr) for t in node.targets if isinstance(t, ast.Name))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.Return, ast.Yield)):
            out |= placed(node.value, taken)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            out |= placed(node.value, taken)  # `example["ids"] = self.emb`
    return out


_MEMORY_COPIES = frozenset({"copy.deepcopy", "copy.copy"})


def _item_cost(fn: FunctionNode, me: Optional[str], methods: dict[str, FunctionNode], aliases: _Aliases,
               depth: int, seen: set[str], optional: Optional[dict[str, str]] = None,
               called: Optional[set[str]] = None) -> tuple[bool, bool]:
    """(does per-item work, yields tensors or stored data). A call of one of the `optional` attributes
    (callables the constructor may be given, None by default) is no work here: it is added to `called`."""
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    params.discard(me or "")
    indexes_data = False
    for node in _own_nodes(fn):
        if isinstance(node, (ast.Yield, ast.YieldFrom)) and fn.name == "__iter__":
            indexes_data = True
        if isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == me:
                # `self.data[index]`, `self.data[start:end]`: stored data read per item (a constant key
                # such as `self.config["size"]` is not)
                if any(isinstance(n, ast.Name) for n in walk(node.slice)):
                    indexes_data = True
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in _LIGHT_FUNCTIONS and not aliases.qualified(func):
            continue
        if aliases.is_any(func, _LIGHT_TORCH):
            indexes_data = True  # makes a tensor per item: cheap, but there is something to pin
            continue
        if aliases.is_any(func, _MEMORY_COPIES):
            # `copy.deepcopy(self.batch)`: a copy in memory of what the dataset holds (openfold's DummyDataset,
            # blind23), no load or decode a worker would take over
            indexes_data = indexes_data or any(
                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me
                for a in node.args for n in walk(a))
            continue
        if isinstance(func, ast.Attribute):
            if optional and called is not None and isinstance(func.value, ast.Name) and func.value.id == me \
                    and func.attr in optional and func.attr not in methods:
                called.add(func.attr)  # `self.T(sample)`: work only where the constructor is given a `t`
                continue
            if isinstance(func.value, ast.Name) and func.value.id == me and func.attr in methods:
                helper = methods[func.attr]
                if func.attr in seen or depth >= 3:
                    continue
                work, reads = _item_cost(helper, _self_name(helper), methods, aliases, depth + 1, seen | {func.attr},
                                         optional, called)
                if work:
                    return True, indexes_data or reads
                indexes_data = indexes_data or reads
                continue
            if func.attr in _LIGHT_METHODS:
                continue
        return True, indexes_data
    return False, indexes_data


def scan(tree: ast.Module, source: str = "") -> FileFacts:
    """The facts of a parsed file; `source`: the digest of its text (`text_digest`), when known."""
    return _Scanner(tree).run(source)


def text_digest(text: str) -> str:
    """What tells two texts apart for their facts (`FileFacts.source`)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def facts_of_text(text: str) -> Optional[FileFacts]:
    """The facts of a file's text, marked with its digest; None when CPython cannot parse it."""
    return facts_and_tree(text)[0]


def facts_and_tree(text: str) -> tuple[Optional[FileFacts], Optional[ast.Module]]:
    """`facts_of_text`, and the tree they were read from (None with no facts). The scan leaves the tree as
    `ast.parse` made it (it only keeps `all_nodes`' list on it), so the linter may take it for the same text."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, None
    try:
        return scan(tree, text_digest(text)), tree
    except RecursionError:
        return None, None


# the module-level import table, for the `ast` detectors' name table (analysis/ast_context.py)
ImportAliases = _Aliases
module_imports = _imports
