"""The project model: facts from the other files of the project a file belongs to.

One cheap pass over the project (CPython's `ast`, cached by content hash) collects every
file's facts (project/facts.py) and the imports between the project's own modules. A rule
then asks about the files around the one it lints, through a `ProjectView`: plain, picklable
data holding exactly the facts that file may use. The view's fingerprint is part of the file's
cache key, so a cached result is invalidated when a fact it used changes, and only then.

Which files are "around" a file depends on the question:
- its callers (every project module that imports it, transitively) decide the device it runs
  on and whether a GradScaler drives its optimizers;
- mixed-precision evidence counts from the file, its callers, and the modules they import
  directly (FSDP policies in `policies.py`, a model that casts itself in `model.py`);
- the dataset classes and optimizer registries it imports by name are looked up where they
  are defined.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from gpulint.project import NOTEBOOK_SUFFIX
from gpulint.project.cpp_std import CPP14_CEILING, propagate
from gpulint.project.env_loops import ANY_CLASS, DYNAMIC, INSTANCE
from gpulint.project.facts import FFI_MODULE, REMOVED_MODULES, SPLAT, ClassFacts, FileFacts, ImportRef
from gpulint.project.iter_next import CALL, LOADER, NEXT_CEILING
from gpulint.project.layers import MODULE
from gpulint.project.loader_flow import AT, CUDA, HAND, IN, STAR
from gpulint.project.methods import named_by
from gpulint.project.requirements import ships_distribution
from gpulint.project.scripts import passed_flags
from gpulint.records import dataclass

ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
_MODULE_EXTENSIONS = (".py", ".pyi")


def _names_extension(ref: ImportRef, path: str, extensions: frozenset[str]) -> bool:
    """`ref` (an import of `path`) names one of the compiled `extensions` (dotted names, as setup.py gives them):
    `import fused_ops`, `from pkg import _C`, or relatively from inside `pkg` (`from . import _C`)."""
    spelled = ref.module if ref.name in (None, "*") else ".".join(filter(None, (ref.module, ref.name)))
    if ref.level:
        package = path.split("/")[:-1]
        if ref.level > 1:
            package = package[:-(ref.level - 1)] if ref.level - 1 <= len(package) else []
    if ref.level:
        spelled = ".".join(filter(None, (".".join(package), spelled)))
    # a `src/` layout: the file's folders spell more than the package name setup.py gives
    return any(spelled == name or spelled.endswith("." + name) for name in extensions) or (
        not ref.level and ref.module in extensions)


def find_root(path: Path, fallback: Optional[Path] = None, memo: Optional[dict[str, bool]] = None) -> Path:
    """The nearest directory at or above `path` holding a project marker, else `fallback` or the file's folder.

    `memo` remembers, for one run, which directories hold a marker: files of one folder then cost
    one look instead of four per parent folder."""
    start = os.path.abspath(path)
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    memo = {} if memo is None else memo
    candidate = directory
    while True:
        marked = memo.get(candidate)
        if marked is None:
            marked = memo[candidate] = any(os.path.exists(os.path.join(candidate, m)) for m in ROOT_MARKERS)
        if marked:
            return Path(candidate)
        parent = os.path.dirname(candidate)
        if parent == candidate:
            break
        candidate = parent
    if fallback is not None:
        return Path(os.path.abspath(fallback))
    return Path(directory)


@dataclass(frozen=True)
class ProjectView:
    """What the project says about one file; the facts its rules may use, and nothing else.

    `own` are the file's own facts: the linter recomputes them from the text it lints (a fix
    round changes the text), the rest comes from the other files of the project.
    """

    own: FileFacts
    gpu_callers: bool = False  # a module that imports this one shows GPU evidence
    # some file of the project shows an accelerator (GPU evidence, MPS or XPU, a framework that picks the
    # device): false in a project that never leaves the CPU (blind25's CapsGNN, blind24's Graph-Bert)
    accelerated_project: bool = False
    rl_callers: bool = False  # a module that imports this one imports a reinforcement-learning environment
    scaler_callers: bool = False  # a module that imports this one creates a GradScaler
    # a module this one imports (two levels deep) creates a GradScaler or scales a loss through one: an
    # optimizer built here may be stepped by it (`train_one_epoch(model, loader, optimizer, scaler)`)
    scaler_importees: bool = False
    # a module this one imports (two levels deep) trains with an unscaled step, where gpulint's float16 fix
    # (GPU001/GPU002) may add a GradScaler: an optimizer built here may be stepped under it
    unscaled_training_importees: bool = False
    # a module this one imports (two levels deep) makes sparse tensors: GCNII's train.py trains model.py's
    # torch.spmm layers on an adjacency utils.py makes sparse
    sparse_importees: bool = False
    # a module this one imports (three levels deep: a training script, a models package, its model module and the
    # loss module it imports) clamps a value to `1 - eps` and takes `log(1 - x)` of it, with an eps that rounds
    # the bound to 1.0 in 16 bits (FileFacts.log_clamp_rounds_to_one): pytorch-retinanet's train.py trains
    # model.py's RetinaNet, whose forward returns losses.py's focal loss over `clamp(p, 1e-4, 1.0 - 1e-4)`
    log_clamp_importees: bool = False
    # a module this one imports (four levels deep: a training script, its model, the model's layers, their
    # sublayers and the attention module) holds a `forward` with a literal past float16's range
    # (FileFacts.forward_overflows_float16): Pyraformer's long_range_main.py trains Pyraformer_LR, whose attention
    # in Modules.py fills masks with -1e9, which float16 autocast cannot hold
    float16_overflow_importees: bool = False
    # a module this one imports (four levels deep, as above) holds a `forward` that reads a value it computes as
    # numpy (FileFacts.forward_reads_numpy): DeepMEDA's main.py trains deep_meda.py's model, whose forward hands
    # `feature.detach().cpu().numpy()` to an SVM; numpy has no bfloat16
    numpy_forward_importees: bool = False
    # a module this one imports (four levels deep, as above) holds a `forward` that writes a submodule's output into
    # a float32 buffer through a mask (FileFacts.forward_index_puts_float32): TensoRF's train.py renders with
    # tensorBase.py's TensorBase, whose `rgb[app_mask] = valid_rgbs` raises under autocast (index_put dtypes)
    index_put_importees: bool = False
    # the project's classes and functions that compute binary_cross_entropy (FileFacts.bce_losses), as `path::Name`,
    # in the modules a caller imports (two levels deep) and in this one's imports (two levels): what a step handed
    # its loss as a parameter may be handed (Unsupervised-Classification's scan.py builds SCANLoss through
    # common_config.py and hands it to train_utils.py's scan_train, whose CUDA autocast would refuse it)
    bce_losses_around: tuple[str, ...] = ()
    # the file or a module of its import closure (every depth; the file's own imports in functions too) reaches the
    # project's own native kernels: it builds them
    # with torch.utils.cpp_extension.load/load_inline, or imports an extension module the project's setup.py
    # compiles (CUDAExtension/CppExtension). stylegan2-pytorch's model.py imports op/, whose fused_act.py and
    # upfirdn2d.py JIT-build CUDA ops that take fp32/fp16 only: autocast's bfloat16 (or its fp32 bias against an
    # fp16 input) breaks them
    native_importees: bool = False
    # a module this one imports defines a class with its own `gradient_checkpointing_enable` (FileFacts
    # `checkpointing_method`): minimal-llama's finetune scripts build their LLaMA rewrites through it
    checkpointing_method_importees: bool = False
    # a module this one imports (two levels deep) freezes a whole network so only a small part trains (CLIP's
    # main.py steps an AdamW over a model whose encoders modules.py freezes)
    freezes_importees: bool = False
    # a module a caller imports directly creates a GradScaler or scales through one (ConvNeXt: main.py takes the
    # optimizer from optim_factory.py and a scaler class from utils.py): the optimizer may be stepped by it
    scaler_beside_callers: bool = False
    # FSDP's ShardedGradScaler is created or imported in a module this one imports (two levels deep) or in one
    # that imports it (dinov2: train.py builds the AdamW that ssl_meta_arch.py's ShardedGradScaler steps, imported
    # through the project's dinov2/fsdp package, which train.py imports too)
    sharded_scaler_around: bool = False
    replacer_callers: bool = False  # a module that imports this one hands optimizers to MS-AMP (or alike)
    # how callers shard parameters ("fsdp", "tensor-parallel") or replicate the model ("data-parallel")
    parallelism_callers: tuple[str, ...] = ()
    fused_sgd_around: bool = False  # fused SGD with momentum is built here, in a caller or in an import
    # kinds of 16-bit training evidence in the files around this one (callers, and what they import)
    mixed_elsewhere: tuple[str, ...] = ()
    # project classes imported by the file, keyed as the file spells the import target
    # ("pkg.data.MyDataset", ".data.MyDataset", "pkg.data" + ".MyDataset" for `import pkg.data`)
    imported_classes: dict[str, ClassFacts] = field(default_factory=dict)
    # the classes the imported model classes build, by `path::Name` (their widths, for GPU001)
    model_parts: dict[str, ClassFacts] = field(default_factory=dict)
    star_classes: dict[str, ClassFacts] = field(default_factory=dict)  # names a `from x import *` brings
    # modules and names a `from x import *` of a project module brings because x imported them (`torch` from
    # deeplab's `from modeling.deeplab import *`), as qualified names; only when every star import of the file
    # is a project module's and no two of them bind the name differently
    star_modules: dict[str, str] = field(default_factory=dict)
    imported_optimizers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # keyed like imported_classes
    imported_ints: dict[str, dict[str, int]] = field(default_factory=dict)  # dataclass int fields of importees
    trained_by_callers: frozenset[str] = frozenset()  # top-level classes of this file a caller trains
    # top-level classes of this file that no training reaches: the file trains nothing, and every file that
    # imports it names what it takes (`from m import f`), and takes either none of the class's aliases or
    # takes one but trains nothing and is imported by no file (a predictor, a demo). Empty when unknown
    untrained: frozenset[str] = frozenset()
    # imported project functions that build datasets with rows computed up front, spelled as imported
    row_functions: frozenset[str] = frozenset()
    # imported project functions that cast the parameters of the model they return to a dtype they are handed
    # (FileFacts.dtype_casts), spelled as imported: -> (that parameter, its position; -1 keyword-only)
    dtype_casts: dict[str, tuple[str, int]] = field(default_factory=dict)
    # imported project functions whose batches hold a container the pin thread cannot pin, spelled as
    # imported ("util.misc.collate_fn" for `import util.misc as utils`, or the name a `from` import binds)
    unpinned_collates: frozenset[str] = frozenset()
    # imported project functions that move tensors to a device (facts.FileFacts.device_collates), spelled the same
    # way: a collate_fn of them builds batches on the GPU
    device_collates: frozenset[str] = frozenset()
    # imported project functions that return torch's checkpoint function and nothing else
    # (FileFacts.checkpoint_getters), spelled the same way (GPU302)
    checkpoint_getters: frozenset[str] = frozenset()
    # imported project functions that read a tensor they are handed with `.numpy()` (FileFacts.numpy_readers),
    # spelled the same way, with the positions read: pytorch-nested-unet's train.py calls metrics.py's iou_score on
    # the model's output
    numpy_readers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # devices other than CUDA named by callers ("mps", "xpu"), or "framework" when one picks the device there
    devices_callers: tuple[str, ...] = ()
    # names this file imports that another module computed from torch's version (`from utils import TORCH_2`)
    imported_version_flags: frozenset[str] = frozenset()
    # integers the file's callers pass by keyword to classes or set in config dicts: field -> values
    config_ints_callers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # backend settings (facts.SETTING_*) made by a caller, or by a module this file or a caller imports,
    # directly or through others
    settings_around: tuple[str, ...] = ()
    scanned: bool = False  # built from a project scan; False: the file alone
    # what the files around this one (its callers, the modules they import, the modules it imports, two
    # levels) give options named like a fused-attention switch (facts.FUSED_OPTION): option -> kinds
    options_around: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the argparse defaults of those files (facts.FileFacts.argparse_defaults): dest -> the default they all give
    # it, None where they differ (`args.layers` in a trainer whose parser lives in parser.py, which main.py imports)
    argparse_around: dict[str, Any] = field(default_factory=dict)
    # the capitalised callees of those files: the most positional arguments a call passes (facts.SPLAT)
    class_calls_around: dict[str, int] = field(default_factory=dict)
    # class-level bool fields named like a fused-attention switch in those files: field -> {"path:Class": default}
    option_defaults_around: dict[str, dict[str, bool]] = field(default_factory=dict)
    # argparse flags this file or a caller declares off (`action="store_true"`, `default=False`), declared
    # with no other default around, that no shell script of the project passes (project/scripts.py), where
    # the project's scripts do run these parsers (they pass other flags they declare): the code behind them
    # does not run as the project is shipped
    flags_off: frozenset[str] = frozenset()
    # the first torch a module this one imports (transitively, three levels) cannot be imported on
    ceiling_importees: Optional[tuple[int, int]] = None
    # the first torch the modules importing this one cannot run on, where this module's code runs only under
    # them (`Project._ceiling_importers`): the highest of their ceilings
    ceiling_importers: Optional[tuple[int, int]] = None
    # the first torch this module's code cannot run on, carried through the whole import graph (project/cpp_std.py
    # `propagate`, `Project._code_ceilings`): what it imports unconditionally (directly or through others), a
    # group of alternative imports each branch of which is capped (`try: import _raymarching` / `except
    # ImportError: from .backend import _backend`), a compiled extension pinned to C++14 it imports by name,
    # and for a helper that runs only under its importers the highest of their ceilings
    ceiling_code: Optional[tuple[int, int]] = None
    # a file of the project builds its native extension with torch.utils.ffi (FileFacts.builds_ffi_extension):
    # the project's compiled ops, and so the project, run only on a torch before 1.0
    ffi_extension_built: bool = False
    # neither this file nor any that imports it (transitively) may train, and one of them is an inference
    # script (a `__main__`, or a notebook, that runs models under no_grad): the file's modules are evaluated,
    # not trained
    evaluated_only: bool = False
    # the file builds a class a project module it imports defines over Hugging Face's Trainer (FileFacts
    # .hf_trainers, also through a chain of the project's subclasses across its modules): MeZO's run.py runs
    # `OurTrainer(...).train()`, trainer.py's `class OurTrainer(Trainer)`. It fine-tunes as Trainer does: it may
    # train (`may_train`), whatever its own names say (Project._trains_through)
    trains_through_import: bool = False
    # a script: no project file imports it and its folder is no package (no `__init__.py`), so a function
    # nothing in the file reaches never runs; False when unknown (the file alone, an editor's buffer)
    script: bool = False
    # top-level functions of a module other files import that nothing reaches: nothing in the file calls
    # them and every import of the module names other things (`from previous_chapters import GPTModel`)
    unimported: frozenset[str] = frozenset()
    # private methods of this file's classes that nothing calls (FileFacts.uncalled_methods, "Class._name"): no
    # project module that imports this one (transitively: a subclass there, a caller) or that it imports (a base
    # class that calls its hooks, a helper handed `self`) reads the name as an attribute or spells it as a string,
    # and the class's bases lead to `object` through the project's own classes (FileFacts.plain_classes)
    uncalled_methods: frozenset[str] = frozenset()
    # this file's functions and methods ("f", "Class.method") that a loop of a module importing it calls while it
    # calls an environment (FileFacts.env_calls, resolved through that module's imports of this one: main.py's
    # `policy.train(buffer)` for `policy = DQN.DQN(...)`, beside `env.step(action)`, is DQN.py's "DQN.train"; a
    # method called on a receiver of unknown class, `agent.update(...)`, is "*.update": any class's)
    env_called: frozenset[str] = frozenset()
    # another project file imports this one (directly or through others): its `__main__` block is a self-test
    # or a demo run by hand, not the training
    imported: bool = False
    # what the modules importing this one do with the loaders its top-level functions return (GPU101):
    # "<function><slot>" -> kinds (project/loader_flow.py: MOVED, NON_BLOCKING, CUDA when the copy names
    # CUDA or a CUDA device of a module the consumer imports, and "in:<path>" for each consuming file)
    moved_returns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what the functions of project modules this file imports do with a value handed to them that their own loop
    # iterates (FileFacts.parameter_moves: GPU101's loader built here and handed to an imported `train(...)`):
    # "<function as spelled, qualified as `_imported_functions` spells it>#<position or name>" -> kinds (MOVED,
    # NON_BLOCKING, CUDA) and "in:<the file that defines it>"
    handed_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what the methods of classes of project modules this file imports do with a value handed to them
    # (FileFacts.method_moves: GPU101's batch handed to `model.do_pass(data)` for `model = XMemTrainer(...)`):
    # "<class as spelled, qualified as `_imported_functions` spells it>.<method>#<position or name>" -> kinds
    # (MOVED, NON_BLOCKING, CUDA) and "in:<the file that defines it>"; "<class>.<method>" -> ("returns-self",)
    handed_methods: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # devices naming CUDA that this file imports from project modules, spelled as the file reads them
    # ("CFG.device" for `import config as CFG`, "device" for `from config import device`)
    imported_cuda_devices: frozenset[str] = frozenset()
    # a class of this file, or a project base class of it, copies to `self.<device>` that a project base class of
    # it (resolved through the imports, to any depth) binds only to a device naming CUDA (KAIR's ModelBase,
    # blind11; BasicSR's BaseModel, blind20)
    inherited_cuda: bool = False
    # the file copies to `opt.device` for `opt = OptInit().get_args()`, a function or method of a project module
    # it imports whose returned object has that device bound only to CUDA (FileFacts.cuda_returns; deep_gcns'
    # config.py, blind20)
    returned_cuda: bool = False
    # classes of this file whose one project base, a `from` import of another module, moves attributes of `self`
    # to a device at the top of its `__init__` (FileFacts.init_moves of that class): class -> those moves
    inherited_moves: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def alone(cls, facts: FileFacts) -> "ProjectView":
        """The view of a file with no project around it (stdin, tests, editors)."""
        return cls(own=facts)

    def with_own(self, facts: FileFacts) -> "ProjectView":
        return replace(self, own=facts)

    def fingerprint(self) -> str:
        """What the file's cache key needs beyond its bytes: the facts from other files. `own` is left
        out, since it is computed from those bytes. (`asdict` deep-copies every leaf: a warm run of 100
        files spent more time in it than in reading the cache.)"""
        data = {name: _plain(getattr(self, name)) for name in _VIEW_FIELDS}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:24]

    # -- merged own + project facts -------------------------------------------------------------
    @property
    def gpu(self) -> bool:
        return self.own.gpu or self.gpu_callers

    @property
    def imported_cuda(self) -> bool:
        """The file copies tensors to a device a project module it imports binds to CUDA (`x.to(CFG.device)`,
        config.py's `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`), or to a
        `self.device` a project base class of its class binds so (`inherited_cuda`): the same evidence as that
        expression written in the file itself."""
        return self.inherited_cuda or self.returned_cuda or \
            not self.imported_cuda_devices.isdisjoint(self.own.imported_device_targets)

    @property
    def torch_ceiling(self) -> Optional[tuple[int, int]]:
        """The first torch this file cannot run on, from its own code or that of the modules it imports
        (`from torch._six import inf` somewhere on the way: torch 2.0; a uint8 mask in `masked_fill`: 2.1;
        `loss.data[0]` of a loss it calls `.backward()` on: 1.0), from
        a version assertion in its `__main__` block when no project file imports it, from the modules that
        import it where its code runs only under them (`ceiling_importers`), from the ceilings carried through
        the whole import graph (`ceiling_code`: an extension pinned to C++14 the code builds or imports, 2.1), or
        from a project built with torch.utils.ffi; None when nothing says so."""
        ffi = REMOVED_MODULES[FFI_MODULE] if self.ffi_extension_built else None
        script = None if self.imported else self.own.script_ceiling
        cpp14 = CPP14_CEILING if self.own.cpp14_build else None
        known = [c for c in (self.own.torch_ceiling, self.ceiling_importees, self.ceiling_importers, self.ceiling_code,
                             cpp14, ffi, script) if c is not None]
        return min(known) if known else None

    @property
    def unreached(self) -> frozenset[str]:
        """Code of this file that never runs: top-level functions nothing in the file reaches that no other
        file can import (a script) or that no import names, and private methods nothing calls ("Class._name").
        Read alone (no project around it), a private method counts when its module never names it and its
        class derives from nothing but `object` (its own module's classes, ABC): only a subclass elsewhere
        could call it, which the convention of the leading underscore leaves to the module."""
        functions = frozenset(self.own.unreached) if self.script else self.unimported
        candidates = frozenset(self.own.uncalled_methods)
        if not candidates:
            return functions
        if self.scanned:
            return functions | (self.uncalled_methods & candidates)
        plain = self.own.plain_classes
        return functions | frozenset(m for m in candidates if plain.get(m.partition(".")[0]) == ())

    @property
    def rl(self) -> bool:
        """The file or a caller imports a reinforcement-learning environment: its loops wait on a simulator."""
        return self.own.rl or self.rl_callers

    @property
    def env_callers(self) -> frozenset[str]:
        """The functions and methods of this file ("f", "Class.method") that run inside a loop waiting on an
        environment: called from such a loop of the file itself (through the file's own calls) or of a module
        that imports it (project/env_loops.py)."""
        return frozenset(name for name in self.own.env_calls if INSTANCE not in name and name != DYNAMIC and (
            "." not in name or name.partition(".")[0] in self.own.classes)) | self.env_called

    @property
    def scaler(self) -> bool:
        return self.own.scaler or self.scaler_callers

    @property
    def may_train(self) -> bool:
        """FileFacts.may_train, or the file builds a project subclass of Hugging Face's Trainer."""
        return self.own.may_train or self.trains_through_import

    @property
    def inference_script(self) -> bool:
        """FileFacts.inference_script, unless the file trains through a project subclass of HF's Trainer."""
        return self.own.inference_script and not self.trains_through_import

    @property
    def mixed_precision(self) -> tuple[str, ...]:
        """Kinds of 16-bit training evidence in the file or around it."""
        return tuple(sorted(set(self.own.mixed_precision) | set(self.mixed_elsewhere)))

    def class_facts(self, spelled: str) -> Optional[ClassFacts]:
        """A class by the name the file uses: its own top-level class, or an imported project class (or a
        class one of those builds, by `path::Name`)."""
        return (self.own.classes.get(spelled) or self.imported_classes.get(spelled) or self.star_classes.get(spelled)
                or self.model_parts.get(spelled))

    def optimizer_classes(self, spelled: str) -> tuple[str, ...]:
        return self.own.optimizers.get(spelled) or self.imported_optimizers.get(spelled, ())

    def dataclass_int(self, field_name: str) -> Optional[int]:
        """The value of a config int field of that name: the largest value this file or a caller passes
        (`ModelArgs(n_layers=6)` in the training script beats `n_layers: int = 32` in the model file),
        else the dataclass default when exactly one is known."""
        passed = self.configured_ints(field_name)
        if passed:
            return max(passed)
        values = set(self.own.dataclass_ints.get(field_name, {}).values())
        values |= set(self.imported_ints.get(field_name, {}).values())
        return values.pop() if len(values) == 1 else None

    def configured_ints(self, field_name: str) -> tuple[int, ...]:
        """Values this file or its callers pass for a config field by keyword."""
        return tuple(sorted(set(self.own.config_ints.get(field_name, ()))
                            | set(self.config_ints_callers.get(field_name, ()))))

    def option_values(self, option: str) -> frozenset[str]:
        """What this file and the files around it give an option named like a fused-attention switch
        (facts.OPTION_ON / OPTION_OFF / OPTION_UNKNOWN); empty: nothing gives it a value."""
        return frozenset(self.own.option_values.get(option, ())) | frozenset(self.options_around.get(option, ()))

    def argparse_default(self, dest: str) -> Any:
        """The default of the command-line option `dest`: the one this file declares, else the one the files
        around it (callers, the modules they import, the modules it imports) agree on; None when unknown."""
        if dest in self.own.argparse_defaults:
            return self.own.argparse_defaults[dest]
        return self.argparse_around.get(dest)

    def class_calls(self, name: str) -> Optional[int]:
        """The most positional arguments a call of the capitalised name passes here or around
        (facts.SPLAT: one passes `*args` or unseen `**kwargs`); None: no call of it is seen."""
        found = [c for c in (self.own.class_calls.get(name), self.class_calls_around.get(name)) if c is not None]
        if not found:
            return None
        return SPLAT if SPLAT in found else max(found)

    def option_defaults(self, option: str) -> dict[str, frozenset[bool]]:
        """The classes here or around that hold a field named like a fused-attention switch, by name, with
        the defaults they give it (two classes of one name may differ)."""
        out: dict[str, set[bool]] = {}
        for key, default in (*self.own.option_defaults.get(option, {}).items(),
                             *self.option_defaults_around.get(option, {}).items()):
            out.setdefault(key.rpartition(":")[2], set()).add(default)
        return {name: frozenset(found) for name, found in out.items()}

    @property
    def settings(self) -> frozenset[str]:
        """Backend settings made in this file or around it (`settings_around`)."""
        return frozenset(self.own.settings) | frozenset(self.settings_around)

    @property
    def devices(self) -> frozenset[str]:
        """Devices other than CUDA named here or by a caller, and "framework" when one picks the device."""
        return frozenset(self.own.devices) | frozenset(self.devices_callers)

    @property
    def version_flags(self) -> frozenset[str]:
        """Names that hold a test of torch's version, defined here or imported."""
        return frozenset(self.own.version_flags) | self.imported_version_flags

    @property
    def parallelism(self) -> frozenset[str]:
        return frozenset(self.own.parallelism) | frozenset(self.parallelism_callers)

    @property
    def fused_sgd(self) -> bool:
        return self.own.fused_sgd_momentum or self.fused_sgd_around

    @property
    def trained(self) -> frozenset[str]:
        return self.trained_by_callers | _trained_here(self.own)


def _trained_here(facts: FileFacts) -> frozenset[str]:
    if not facts.training:
        return frozenset()
    used = set(facts.names)
    return frozenset(name for name in facts.classes if aliases_of(name, facts) & used)


def aliases_of(name: str, facts: FileFacts) -> set[str]:
    """`name` and every top-level name of the file whose definition leads to it (registries, factories)."""
    out = {name}
    changed = True
    while changed:
        changed = False
        for other, refs in facts.refs.items():
            if other not in out and out.intersection(refs):
                out.add(other)
                changed = True
    return out


class Project:
    """Every Python file under one root, with its facts and the imports between them.

    Transitive callers are computed once for all files, as bit sets over the strongly connected
    components of the import graph, so a project of thousands of files stays cheap.
    """

    def __init__(self, root: Path, facts: dict[str, FileFacts], existing: Optional[Iterable[str]] = None,
                 import_words: Optional[set[str]] = None, accelerated: Optional[bool] = None) -> None:
        """`existing`: every module file of the project with facts, when `facts` holds only some of
        them (the files one file's view reads, dispatch/project_scan.py): imports then resolve exactly
        as in the whole project; `import_words` then holds the words of `_words_imported` the views ask
        about that some file of the whole project spells, and `accelerated` whether some file of the whole
        project shows an accelerator (ProjectView.accelerated_project). None: `facts` is the whole project."""
        self.root = root
        self.facts = facts  # relative posix path -> facts
        self.paths = sorted(facts)
        self.index = {p: i for i, p in enumerate(self.paths)}
        self._exists: Union[set[str], dict[str, FileFacts]] = set(existing) if existing is not None else facts
        self._has_src = any(p.startswith("src/") for p in self._exists)
        # the root folder's name when the root is a package (holds `__init__.py`): see `resolve`
        self._root_package = root.name if "__init__.py" in self._exists and root.name.isidentifier() else None
        self.edges: dict[str, list[tuple[str, ImportRef]]] = {p: self._resolve_all(p) for p in self.paths}
        self._importees = {p: {t for t, _ in self.edges[p]} for p in self.paths}
        self._callers = self._all_callers()
        # files that build a project subclass of Hugging Face's Trainer: they may train (`_may_train`)
        self._trains_through = self._trains_through_imports()
        bit = self._bit
        # module -> the files that import it inside a function (FileFacts.lazy_imports: a factory's `define_G`)
        self._lazy_importers: dict[str, int] = {}
        for path in self.paths:
            for ref in facts[path].lazy_imports:
                for target in self.resolve(path, ref):
                    if target in facts and target != path:
                        self._lazy_importers[target] = self._lazy_importers.get(target, 0) | bit(path)
        self._gpu = sum(bit(p) for p in self.paths if facts[p].gpu)
        self._accelerated = accelerated if accelerated is not None else any(map(own_accelerated, facts.values()))
        self._ffi_extension_built = any(facts[p].builds_ffi_extension for p in self.paths)
        self._code_ceilings: Optional[dict[str, tuple[int, int]]] = None  # see `_code_ceiling`
        self._distributions: dict[str, bool] = {}  # see `_shipped`
        self._bce: Optional[tuple[frozenset[str], int]] = None  # see `_bce_reach`
        self._native: Optional[frozenset[str]] = None  # see `_native_reach`
        self._fed_native: Optional[frozenset[str]] = None  # see `_fed_native_reach`
        self._rl = sum(bit(p) for p in self.paths if facts[p].rl)
        self._extensions = frozenset(name for p in self.paths for name in facts[p].extensions)
        self._scaler = sum(bit(p) for p in self.paths if facts[p].scaler)
        self._sharded_scaler = sum(bit(p) for p in self.paths if facts[p].sharded_scaler)
        self._replacer = sum(bit(p) for p in self.paths if facts[p].replaces_optimizers)
        self._fused_sgd = sum(bit(p) for p in self.paths if facts[p].fused_sgd_momentum)
        self._devices = {kind: sum(bit(p) for p in self.paths if kind in facts[p].devices)
                         for kind in ("framework", "mps", "xpu")}
        self._parallel = {kind: sum(bit(p) for p in self.paths if kind in facts[p].parallelism)
                          for kind in ("fsdp", "tensor-parallel", "data-parallel")}
        setting_kinds = sorted({k for f in facts.values() for k in f.settings})
        self._setting_here = {k: sum(bit(p) for p in self.paths if k in facts[p].settings) for k in setting_kinds}
        # the files that import, directly or through others, a file that makes the setting
        self._setting_importers = {k: 0 for k in setting_kinds}
        for path in self.paths:
            for kind in facts[path].settings:
                self._setting_importers[kind] |= self._callers[self.index[path]]
        kinds = sorted({k for f in facts.values() for k in f.mixed_precision})
        self._kind_here = {k: sum(bit(p) for p in self.paths if k in facts[p].mixed_precision) for k in kinds}
        self._kind_imported = {k: sum(bit(p) for p in self.paths
                                      if any(k in facts[t].mixed_precision for t in self._importees[p]))
                               for k in kinds}
        # the same, counting only importees that train nothing themselves (an autocast helper, a model module):
        # a caller that also imports a sibling trainer with its own autocast step says nothing about this file's
        # step (blind10: Time-Series-Library's run.py imports the long-term forecaster, whose step autocasts
        # under --use_amp, beside the short-term one, whose step never does)
        self._kind_helper_imported = {k: sum(bit(p) for p in self.paths
                                             if any(k in facts[t].mixed_precision and not facts[t].training
                                                    for t in self._importees[p]))
                                      for k in kinds}
        # every module name part and imported name any import of the project spells: a file whose stem is
        # among them may be imported in a way the resolver cannot follow (`sys.path` tricks, another root)
        self._import_words = import_words if import_words is not None else _words_imported(facts.values())
        self._users: dict[str, int] = {}  # identifier -> files with a training step that use it
        for path in self.paths:
            if facts[path].training:
                for name in facts[path].names:
                    self._users[name] = self._users.get(name, 0) | bit(path)
        self._exported: dict[str, dict[str, ClassFacts]] = {}
        self.parts: dict[str, ClassFacts] = {}  # model classes by `path::Name` (see `_global_class`)
        self._consumers: Optional[dict[str, list[str]]] = None  # see `_moved_returns`
        self._imports_of: Optional[dict[str, dict[str, list[ImportRef]]]] = None  # target -> importer -> refs
        # modules a training file uses whole, as a registry (`models_mae.__dict__[args.model]`)
        self._registry_users: dict[str, int] = {}
        self._script_flags: Optional[frozenset[str]] = None  # flags the project's shell scripts pass
        for path in self.paths:
            lookups = set(facts[path].dict_lookups)
            if not facts[path].training or not lookups:
                continue
            for target, ref in self.edges[path]:
                if ref.local in lookups and (ref.name is None or target.endswith(
                        (f"/{ref.name}.py", f"{ref.name}.py", f"/{ref.name}/__init__.py"))):
                    self._registry_users[target] = self._registry_users.get(target, 0) | bit(path)

    def _untrained(self, rel: str, trained: frozenset[str]) -> frozenset[str]:
        """`ProjectView.untrained`: the classes of `rel` whose every use by another file is known and trains
        nothing. A module import, a star import or a file that imports a class and is itself imported (a model
        built into another one) leaves the class unknown."""
        own = self.facts[rel]
        if self._may_train(rel) or not own.classes:
            return frozenset()
        if self._imports_of is None:
            self._imports_of = {}
            for path in self.paths:
                for target, ref in self.edges[path]:
                    self._imports_of.setdefault(target, {}).setdefault(path, []).append(ref)
        by_importer = self._imports_of.get(rel, {})
        taken: dict[str, bool] = {}  # name imported from `rel` -> whether some importer may train through it
        for path, refs in by_importer.items():
            leaf = not self._may_train(path) and not self._callers[self.index[path]]
            for ref in refs:
                name = ref.name
                if name is None or name == "*":
                    return frozenset()  # the module itself: any of its names may be used
                dotted = f"{ref.module}.{name}" if ref.module else name
                if _is_submodule(rel, dotted.replace(".", "/")):
                    return frozenset()  # `from pkg import module`
                taken[name] = taken.get(name, False) or not leaf
        if not by_importer:
            return frozenset()
        return frozenset(name for name in own.classes if name not in trained
                         and not any(taken.get(alias, False) for alias in aliases_of(name, own)))

    def _flags_off(self, rel: str, callers: int) -> frozenset[str]:
        """ProjectView.flags_off: the flags declared off here or in a caller that no shipped script passes."""
        defaults: dict[str, set[object]] = {}
        for path in [rel, *(self.paths[i] for i in _members(callers))]:
            for dest, default in self.facts[path].argparse_defaults.items():
                defaults.setdefault(dest, set()).add(default if default is False else repr(default))
        off = {dest for dest, seen in defaults.items() if seen == {False}}
        if not off:
            return frozenset()
        if self._script_flags is None:
            self._script_flags = passed_flags(self.root)
        if not self._script_flags & set(defaults):
            return frozenset()  # no shipped script runs these parsers: how the project is run is not shown
        return frozenset(off - self._script_flags)

    def _bit(self, path: str) -> int:
        return 1 << self.index[path]

    # -- imports --------------------------------------------------------------------------------
    def _module_file(self, directory: str, dotted: str) -> Optional[str]:
        """`directory/dotted` as a module file or package; `dotted` "" is the package `directory` itself."""
        parts = [directory] if directory else []
        if dotted:
            parts.append(dotted.replace(".", "/"))
        base = "/".join(parts)
        candidates = [base + "/__init__.py"] if not dotted else [base + ".py", base + ".pyi", base + "/__init__.py"]
        for candidate in candidates:
            candidate = candidate.lstrip("/")
            if candidate in self._exists:
                return candidate
        return None

    def _search_dirs(self, importer: str) -> list[str]:
        """sys.path as the importer sees it: its own folder up to the root, then `src/`."""
        parts = importer.split("/")[:-1]
        dirs = ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]
        if self._has_src:
            dirs.append("src")
        return dirs

    def resolve(self, importer: str, ref: ImportRef) -> list[str]:
        """The project files an import binding reaches: the module, and for `from m import x` a submodule x."""
        if ref.level:
            parts = importer.split("/")[:-1]
            up = ref.level - 1
            if up > len(parts):
                return []
            directories = ["/".join(parts[:len(parts) - up])]
        elif ref.module:
            directories = self._search_dirs(importer)
        else:
            return []
        searched = [(directory, ref.module) for directory in directories]
        if not ref.level and self._root_package and ref.module.split(".", 1)[0] == self._root_package:
            # the root is itself a package (a setup.py beside its `__init__.py`): its code is run from the folder
            # above, so `import pkg.sub.mod` spells the root's own `sub/mod.py` (GraphSAINT's
            # `import graphsaint.pytorch_version.layers as layers`); tried after the search path, as Python would
            searched.append(("", ref.module.partition(".")[2]))
        for directory, module_name in searched:
            found: list[str] = []
            module = self._module_file(directory, module_name)
            if module:
                found.append(module)
            if ref.name not in (None, "*"):
                sub = self._module_file(directory, f"{module_name}.{ref.name}" if module_name else ref.name)
                if sub:
                    found.append(sub)
            if found:
                return [f for f in found if f != importer]
        return []

    def _resolve_all(self, path: str) -> list[tuple[str, ImportRef]]:
        out = []
        for ref in self.facts[path].imports:
            for target in self.resolve(path, ref):
                if target in self.facts:
                    out.append((target, ref))
        return out

    def importees(self, path: str) -> set[str]:
        return self._importees.get(path, set())

    def _all_callers(self) -> list[int]:
        """For every file, the bit set of the files that import it directly or through others."""
        n = len(self.paths)
        importers: list[list[int]] = [[] for _ in range(n)]
        for source, targets in self._importees.items():
            for target in targets:
                importers[self.index[target]].append(self.index[source])
        self._direct_importers = importers  # by file index: the files that import it directly
        components = _strongly_connected(importers)
        component_of = [0] * n
        for number, members in enumerate(components):
            for member in members:
                component_of[member] = number
        # files in an import cycle, by file: the cycle's members (see `_exported_datasets`)
        self._cycles = {self.paths[m]: tuple(sorted(self.paths[i] for i in members))
                        for members in components if len(members) > 1 for m in members}
        # Tarjan emits components in reverse topological order of the `importers` graph: every
        # component reachable from one comes before it, so one pass fills the reach sets.
        reach = [0] * len(components)
        for number, members in enumerate(components):
            bits = 0
            for member in members:
                bits |= 1 << member
                for importer in importers[member]:
                    other = component_of[importer]
                    if other != number:
                        bits |= reach[other]
            reach[number] = bits
        return [reach[component_of[i]] & ~(1 << i) for i in range(n)]

    def callers(self, path: str) -> frozenset[str]:
        """Every project file that imports `path`, directly or through others."""
        bits = self._callers[self.index[path]]
        return frozenset(p for i, p in enumerate(self.paths) if bits >> i & 1)

    # -- views ----------------------------------------------------------------------------------
    def relative(self, path: Path) -> Optional[str]:
        try:
            relative = Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return None
        return relative if relative in self.facts else None

    def view(self, path: Path) -> Optional[ProjectView]:
        rel = self.relative(path)
        if rel is None:
            return None
        own = self.facts[rel]
        me = self._bit(rel)
        callers = self._callers[self.index[rel]]
        elsewhere = tuple(kind for kind in self._kind_here
                          if callers & (self._kind_here[kind] | self._kind_helper_imported[kind])
                          or me & self._kind_imported[kind])
        classes, star, optimizers = self._visible(rel)
        row_functions = frozenset(
            "." * ref.level + ref.module + ("." if ref.module else "") + ref.name
            for target, ref in self.edges.get(rel, ())
            if ref.name not in (None, "*") and ref.name in self.facts[target].row_functions)
        collates = self._imported_functions(rel, lambda facts: facts.unpinned_collates)
        casts = {spelled: self.facts[target].dtype_casts[name]
                 for spelled, target, name in self._imported_function_refs(rel, lambda f: tuple(f.dtype_casts))}
        configured: dict[str, set[int]] = {}
        for index in _members(callers):
            for name, values in self.facts[self.paths[index]].config_ints.items():
                configured.setdefault(name, set()).update(values)
        flags = frozenset(ref.local for target, ref in self.edges.get(rel, ())
                          if ref.name not in (None, "*") and ref.name in self.facts[target].version_flags)
        ints: dict[str, dict[str, int]] = {}
        for source in sorted(self._closure(rel, depth=2)):
            for name, by_class in self.facts[source].dataclass_ints.items():
                ints.setdefault(name, {}).update({f"{source}:{k}": v for k, v in by_class.items()})
        # the files around this one: its callers, the modules they import, the modules it imports (two levels)
        around = {self.paths[i] for i in _members(callers)}
        around |= {t for p in list(around) for t in self._importees[p]} | self._closure(rel, depth=2)
        around.discard(rel)
        argparse: dict[str, Any] = {}
        for source in sorted(around):
            for dest, default in self.facts[source].argparse_defaults.items():
                argparse[dest] = default if argparse.get(dest, default) == default else None
        options: dict[str, set[str]] = {}
        class_calls: dict[str, int] = {}
        option_defaults: dict[str, dict[str, bool]] = {}
        if any(c.module for c in own.classes.values()):  # only a model file may hold a fused-attention option
            for source in sorted(around):
                for name, kinds in self.facts[source].option_values.items():
                    options.setdefault(name, set()).update(kinds)
                for name, defaults in self.facts[source].option_defaults.items():
                    option_defaults.setdefault(name, {}).update({f"{source}:{k}": v for k, v in defaults.items()})
            # the calls that matter: of this file's classes, and of the classes that hold such a field
            wanted = set(own.classes) | {key.rpartition(":")[2] for defaults in option_defaults.values()
                                         for key in defaults} | {k for defaults in own.option_defaults.values()
                                                                 for k in defaults}
            for source in around:
                for name, count in self.facts[source].class_calls.items():
                    if name in wanted:
                        known = class_calls.get(name)
                        class_calls[name] = SPLAT if SPLAT in (known, count) else max(count, known or 0)
        if self._registry_users.get(rel, 0) & callers:
            trained = frozenset(own.classes)  # the whole module is a registry a training script picks from
        else:
            trained = frozenset(name for name in own.classes
                                if any(self._users.get(alias, 0) & callers for alias in aliases_of(name, own)))
        return ProjectView(
            own=own, gpu_callers=bool(callers & self._gpu), scaler_callers=bool(callers & self._scaler),
            accelerated_project=self._accelerated or own_accelerated(own),
            rl_callers=bool(callers & self._rl),
            scaler_importees=any(self.facts[p].scaler for p in self._closure(rel, depth=2)),
            unscaled_training_importees=any(self.facts[p].training and not self.facts[p].scaler
                                            and not self.facts[p].mixed_precision
                                            for p in self._closure(rel, depth=2)),
            sparse_importees=any(self.facts[p].sparse for p in self._closure(rel, depth=2)),
            native_importees=self._native_importees(rel),
            checkpointing_method_importees=any(self.facts[p].checkpointing_method
                                               for p in self._closure(rel, depth=1)),
            log_clamp_importees=any(self.facts[p].log_clamp_rounds_to_one for p in self._closure(rel, depth=3)),
            float16_overflow_importees=any(self.facts[p].forward_overflows_float16
                                           for p in self._closure(rel, depth=4)),
            numpy_forward_importees=any(self.facts[p].forward_reads_numpy for p in self._closure(rel, depth=4)),
            index_put_importees=any(self.facts[p].forward_index_puts_float32 for p in self._closure(rel, depth=4)),
            bce_losses_around=self._bce_losses_around(rel, callers),
            freezes_importees=any(self.facts[p].freezes_modules for p in self._closure(rel, depth=2)),
            scaler_beside_callers=any(self.facts[t].scaler for i in _members(callers)
                                      for t in self._importees[self.paths[i]]),
            sharded_scaler_around=bool(callers & self._sharded_scaler) or any(
                self.facts[p].sharded_scaler for p in self._closure(rel, depth=2)),
            evaluated_only=self._evaluated_only(rel, callers),
            trains_through_import=rel in self._trains_through,
            ceiling_importees=min((c for c in (self._own_ceiling(p) for p in self._closure(rel, depth=3))
                                   if c is not None), default=None),
            replacer_callers=bool(callers & self._replacer),
            ceiling_importers=self._ceiling_importers(rel),
            ceiling_code=self._code_ceiling(rel),
            ffi_extension_built=self._ffi_extension_built,
            parallelism_callers=tuple(kind for kind, mask in sorted(self._parallel.items()) if callers & mask),
            fused_sgd_around=bool(callers & self._fused_sgd) or any(
                self.facts[p].fused_sgd_momentum for p in self._closure(rel, depth=2)),
            mixed_elsewhere=elsewhere, imported_classes=classes, star_classes=star,
            star_modules=self._star_modules(rel),
            imported_optimizers=optimizers, imported_ints=ints, trained_by_callers=trained,
            untrained=self._untrained(rel, trained),
            row_functions=row_functions, unpinned_collates=collates, dtype_casts=casts,
            device_collates=self._imported_functions(rel, lambda facts: facts.device_collates),
            checkpoint_getters=self._imported_functions(rel, lambda facts: facts.checkpoint_getters),
            numpy_readers={spelled: self.facts[target].numpy_readers[name] for spelled, target, name
                           in self._imported_function_refs(rel, lambda facts: tuple(facts.numpy_readers))},
            model_parts=self._parts_of(classes, star),
            devices_callers=tuple(kind for kind, mask in sorted(self._devices.items()) if callers & mask),
            imported_version_flags=flags,
            config_ints_callers={k: tuple(sorted(v)) for k, v in sorted(configured.items())},
            settings_around=tuple(kind for kind in self._setting_here
                                  if callers & self._setting_here[kind]
                                  or (callers | me) & self._setting_importers[kind]),
            scanned=True,
            options_around={k: tuple(sorted(v)) for k, v in sorted(options.items())},
            argparse_around=dict(sorted(argparse.items())),
            class_calls_around=dict(sorted(class_calls.items())),
            option_defaults_around=dict(sorted(option_defaults.items())),
            imported=bool(callers & ~me),
            moved_returns=self._moved_returns(rel),
            handed_moves=self._handed_moves(rel),
            handed_methods=self._handed_methods(rel),
            imported_cuda_devices=self._imported_cuda_devices(rel),
            inherited_cuda=self._inherited_cuda(rel),
            returned_cuda=self._returned_cuda(rel),
            inherited_moves=self._inherited_moves(rel),
            flags_off=self._flags_off(rel, callers),
            script=not callers and rel.endswith(".py") and package_init(rel) not in self._exists
            and rel.rpartition("/")[2][:-3] not in self._import_words,
            unimported=self._unimported(rel) if callers else frozenset(),
            uncalled_methods=self._uncalled_methods(rel, callers & ~me),
            env_called=self._env_called(rel),
        )

    @property
    def _dynamic_env_methods(self) -> frozenset[str]:
        """"*.method" for every method an environment loop calls on a receiver of unknown class in a file that
        builds its objects from configuration (FileFacts.env_calls' DYNAMIC marker: `agent =
        hydra.utils.instantiate(cfg)` names its class in a YAML file, so no import leads to it; blind13: drqv2's
        train.py, whose `self.agent.update(...)` beside `self.train_env.step(action)` runs drqv2.py's agent)."""
        cached = self.__dict__.get("_dynamic_env_cache")
        if cached is None:
            cached = frozenset(f"{ANY_CLASS}.{name[len(INSTANCE):]}" for facts in self.facts.values()
                               if DYNAMIC in facts.env_calls for name in facts.env_calls if name.startswith(INSTANCE))
            self.__dict__["_dynamic_env_cache"] = cached
        return cached

    def _env_called(self, path: str) -> frozenset[str]:
        """ProjectView.env_called: the entries of the direct importers' FileFacts.env_calls that name code of
        `path` through their imports of it."""
        out: set[str] = set(self._dynamic_env_methods)
        for index in self._direct_importers[self.index[path]]:
            importer = self.paths[index]
            calls = self.facts[importer].env_calls
            if not calls or importer == path:
                continue
            for target, ref in self.edges[importer]:
                if target != path:
                    continue
                for entry in calls:
                    spelled, _, method = entry.partition(INSTANCE)
                    if not spelled:  # a method called on a receiver of unknown class: any class's of the module
                        out.add(f"{ANY_CLASS}.{method}")
                        continue
                    name = _function_of(spelled, ref, path)
                    if name is not None:
                        out.add(f"{name}.{method}" if method else name)
        return frozenset(out)

    def _imported_functions(self, path: str, listed: Callable[[FileFacts], tuple[str, ...]]) -> frozenset[str]:
        """The top-level functions of imported project modules that `listed` names, spelled as this file
        imports them ("util.misc.collate_fn" for `import util.misc as utils`, or the name a `from` import binds)."""
        return frozenset(spelled for spelled, _, _ in self._imported_function_refs(path, listed))

    def _imported_function_refs(self, path: str, listed: Callable[[FileFacts], tuple[str, ...]]
                                ) -> list[tuple[str, str, str]]:
        """`_imported_functions` with, for each, the module that defines it and its name there."""
        refs: list[tuple[str, str, str]] = []
        for target, ref in self.edges.get(path, ()):
            found = listed(self.facts[target])
            spelled_module = "." * ref.level + ref.module
            if not found:
                continue
            if ref.name is None:  # `import util.misc as utils`: reached as `util.misc.collate_fn`
                refs.extend((f"{spelled_module}.{name}", target, name) for name in found)
                continue
            spelled = f"{spelled_module}.{ref.name}" if ref.module else "." * ref.level + ref.name
            if ref.name in found:
                refs.append((spelled, target, ref.name))
            elif _is_submodule(target, ref.name):  # `from util import misc`: reached as `util.misc.collate_fn`
                refs.extend((f"{spelled}.{name}", target, name) for name in found)
        return refs

    def _evaluated_only(self, path: str, callers: int) -> bool:
        """ProjectView.evaluated_only. Its users are the files that import it (transitively) and those that import
        it or one of them inside a function, with their own importers (a factory's `define_G` that imports the
        network a training script builds through it: KAIR's select_network, blind11)."""
        if self._may_train(path):
            return False
        lazy = self._lazy_importers.get(path, 0)
        for i in _members(callers):
            lazy |= self._lazy_importers.get(self.paths[i], 0)
        users = callers | lazy
        for i in _members(lazy):
            users |= self._callers[i]
        users &= ~self._bit(path)
        return bool(users) and all(not self._may_train(self.paths[i]) for i in _members(users)) \
            and any(self._inference_program(self.paths[i]) for i in _members(callers))

    def _inference_program(self, path: str) -> bool:
        """An inference script (FileFacts.inference_script), or a notebook that runs models under no_grad and trains
        nothing: its cells run top to bottom as a `__main__` block would (dinov2's semantic_segmentation.ipynb,
        the only user of its Mask2Former backbone)."""
        facts = self.facts[path]
        return (facts.inference_script and path not in self._trains_through) or (
            os.path.splitext(path)[1].lower() == NOTEBOOK_SUFFIX and facts.grad_off and not self._may_train(path))

    def _may_train(self, path: str) -> bool:
        """FileFacts.may_train, or the file builds a project subclass of HF's Trainer (`_trains_through`)."""
        return self.facts[path].may_train or path in self._trains_through

    def _hf_trainers(self) -> dict[str, set[str]]:
        """Per file, its top-level classes over Hugging Face's Trainer: FileFacts.hf_trainers, and the classes
        whose base is one of another project module, spelled through an import of it (`from .trainer import
        OurTrainer`, `import trainer as t` then `t.OurTrainer`), to any depth."""
        found = {path: set(self.facts[path].hf_trainers) for path in self.paths if self.facts[path].hf_trainers}
        if not found:
            return found
        changed = True
        while changed:
            changed = False
            for path in self.paths:
                own = found.get(path, set())
                for name, cls in self.facts[path].classes.items():
                    if "." in name or name in own or not cls.bases:
                        continue
                    if any(self._imported_trainer(path, base, found) for base in cls.bases):
                        found.setdefault(path, set()).add(name)
                        own = found[path]
                        changed = True
        return found

    def _imported_trainer(self, path: str, spelled: str, found: dict[str, set[str]]) -> bool:
        """`spelled` (a base as ClassFacts.bases writes it, or a called class's last name, FileFacts.class_calls)
        names one of `found`'s classes of a project module `path` imports at module level."""
        for target, ref in self.edges.get(path, ()):
            trainers = found.get(target)
            if not trainers or ref.name == "*":
                continue
            if ref.name is None:  # `import trainer as t`: `t.OurTrainer`, qualified as `trainer.OurTrainer`
                module, _, last = spelled.rpartition(".")
                if last in trainers and module in ("", ref.module, ref.local):
                    return True
            elif ref.name in trainers and (spelled == ref.local
                                           or (not ref.level and spelled == f"{ref.module}.{ref.name}")):
                return True
        return False

    def _trains_through_imports(self) -> set[str]:
        """The files that may train nothing by their own facts but build (FileFacts.class_calls) a project class
        over Hugging Face's Trainer: their own (through another module's) or one they import."""
        found = self._hf_trainers()
        if not found:
            return set()
        out: set[str] = set()
        for path in self.paths:
            facts = self.facts[path]
            if facts.may_train or not facts.class_calls:
                continue
            own = found.get(path, set())
            if any(name in own or self._imported_trainer(path, name, found) for name in facts.class_calls):
                out.add(path)
        return out

    def _runs_under_importers(self, path: str) -> bool:
        """Whether the code of `path` runs only under the project files that import it: a module that defines
        only (FileFacts.defines_only: no `__main__` block, nothing runs at import) that nothing outside the
        project imports: it lies outside any package (no `__init__.py` beside it: a helper next to the
        scripts), or in a package the project ships no distribution of (no setup.py, setup.cfg or pyproject.toml
        that builds one in its folder or any above it, up to the project's root: requirements.py
        `ships_distribution`), so no one installs it as a library. ibot's evaluation/classification_layer_decay/
        has an `__init__.py`, and nothing in the repository packages it: its fine-tuning script is its only user."""
        if not self.facts[path].defines_only or not path.endswith(".py"):
            return False
        return package_init(path) not in self._exists or not self._shipped(path.rpartition("/")[0])

    def _shipped(self, folder: str) -> bool:
        """A folder of the project (relative, posix; "" the root) or one above it, up to the root, builds a
        distribution (`_runs_under_importers`); remembered per folder."""
        found = self._distributions.get(folder)
        if found is None:
            found = ships_distribution(str(self.root / folder) if folder else str(self.root)) or (
                bool(folder) and self._shipped(folder.rpartition("/")[0]))
            self._distributions[folder] = found
        return found

    def _ceiling_importers(self, path: str) -> Optional[tuple[int, int]]:
        """The highest torch ceiling of the modules that import `path`, when its code runs only under them
        (`_runs_under_importers`: a module that defines only, outside any package others install), imported by
        project files that each carry a ceiling of their own code (FileFacts.torch_ceiling, or the
        `script_ceiling` of one nothing imports). LSTNet's Optim.py, imported only by main.py, which reads its
        loss as `loss.data[0]` (torch 1.0). None when a module importing it carries none."""
        if not self._runs_under_importers(path):
            return None
        found: list[tuple[int, int]] = []
        for importer in sorted(self.paths[i] for i in self._direct_importers[self.index[path]]):
            facts = self.facts[importer]
            script = facts.script_ceiling if not self._callers[self.index[importer]] & ~self._bit(importer) else None
            known = [c for c in (self._own_ceiling(importer), script) if c is not None]
            if not known:
                return None
            found.append(min(known))
        return max(found) if found else None

    def _own_ceiling(self, path: str) -> Optional[tuple[int, int]]:
        """The ceiling of the file's own code: FileFacts.torch_ceiling, or torch 1.13 where it calls `.next()` on
        the iterator of a DataLoader that a function of a project module it imports returns
        (FileFacts.iterator_next resolved against that module's FileFacts.loader_functions)."""
        facts = self.facts[path]
        own = facts.torch_ceiling
        if facts.iterator_next and (own is None or own > NEXT_CEILING) \
                and any(all(self._returns_loader(path, origin) for origin in site) for site in facts.iterator_next):
            return NEXT_CEILING
        return own

    def _returns_loader(self, path: str, origin: str) -> bool:
        """An origin of FileFacts.iterator_next is a DataLoader: one the file builds (`LOADER`), or what a
        function of a project module it imports returns ("call:data_loader.load_training", "call:f[0]")."""
        if origin == LOADER:
            return True
        spelled, bracket, slot = origin[len(CALL):].partition("[")
        for target, ref in self.edges.get(path, ()):
            function = _function_of(spelled, ref, target) if target in self.facts else None
            if function and function + bracket + slot in self.facts[target].loader_functions:
                return True
        return False

    def _code_ceiling(self, path: str) -> Optional[tuple[int, int]]:
        """ProjectView.ceiling_code: computed once for the whole project (project/cpp_std.py `propagate`)."""
        if self._code_ceilings is None:
            self._code_ceilings = self._all_code_ceilings()
        return self._code_ceilings.get(path)

    def _all_code_ceilings(self) -> dict[str, tuple[int, int]]:
        """Seeds: each file's own ceiling (FileFacts.torch_ceiling, C++14 builds included), the `script_ceiling`
        of a file nothing imports, and the C++14 extensions setup.py files compile (FileFacts.cpp14_extensions),
        reached by the imports that name them (`import _raymarching`, `from . import _C`)."""
        pinned = frozenset(name for p in self.paths for name in self.facts[p].cpp14_extensions)
        extension = "\0cpp14-extension"  # a node for the compiled modules: never a file's name
        own: dict[str, Optional[tuple[int, int]]] = {extension: CPP14_CEILING} if pinned else {}
        requires: dict[str, list[list[list[str]]]] = {}
        importers: dict[str, list[str]] = {}
        helpers: list[str] = []
        for path in self.paths:
            facts = self.facts[path]
            script = facts.script_ceiling if not self._callers[self.index[path]] & ~self._bit(path) else None
            cpp14 = CPP14_CEILING if facts.cpp14_build else None
            own[path] = min((c for c in (self._own_ceiling(path), script, cpp14) if c is not None), default=None)

            resolved: dict[ImportRef, list[str]] = {}
            for target, ref in self.edges[path]:
                resolved.setdefault(ref, []).append(target)

            def targets(ref: ImportRef, path: str = path, resolved: dict[ImportRef, list[str]] = resolved) -> list[str]:
                found = list(resolved.get(ref, ()))
                if pinned and _names_extension(ref, path, pinned):
                    found.append(extension)
                return found

            conditional = set(facts.conditional_imports)
            groups: list[list[list[str]]] = [[targets(ref)] for ref in facts.imports if ref not in conditional]
            for group in facts.import_alternatives:
                groups.append([[t for ref in branch for t in targets(ref)] for branch in group])
            requires[path] = [g for g in groups if all(g)]
            importers[path] = [self.paths[i] for i in self._direct_importers[self.index[path]]]
            if self._runs_under_importers(path):
                helpers.append(path)
        ceilings = propagate([*self.paths, extension] if pinned else self.paths, own, requires, importers, helpers)
        ceilings.pop(extension, None)
        return ceilings

    def _unimported(self, path: str) -> frozenset[str]:
        """The functions of `path` nothing in it reaches (FileFacts.unreached) that no import of it names;
        empty when some file imports the module itself (`import m`, `from pkg import m`) or all of it (`*`)."""
        own = self.facts[path]
        if not own.unreached:
            return frozenset()
        stem = path.rpartition("/")[2].rsplit(".", 1)[0]
        named: set[str] = set()
        for edges in self.edges.values():
            for target, ref in edges:
                if target != path:
                    continue
                if ref.name is None or ref.name in ("*", stem):
                    return frozenset()
                named.add(ref.name)
        return frozenset(own.unreached) - named

    def _uncalled_methods(self, path: str, callers: int) -> frozenset[str]:
        """ProjectView.uncalled_methods: the candidates of `path` that no module importing it (transitively)
        or imported by it (transitively) names, of classes whose bases are followed to `object`."""
        own = self.facts[path]
        if not own.uncalled_methods:
            return frozenset()
        attributes: set[str] = set()
        strings: set[str] = set()
        for other in [self.paths[i] for i in _members(callers)] + sorted(self._closure(path, depth=len(self.paths))):
            attributes.update(self.facts[other].private_attributes)
            strings.update(self.facts[other].private_strings)
        out: set[str] = set()
        for key in own.uncalled_methods:
            owner, _, name = key.partition(".")
            if name not in attributes and not named_by(name, strings) \
                    and self._plain_class(path, owner, frozenset()):
                out.add(key)
        return frozenset(out)

    def _plain_class(self, path: str, name: str, seen: frozenset[tuple[str, str]]) -> bool:
        """The class `name` of `path` has bases that lead to `object` through the project's own classes: each
        name a `from` import binds among them (FileFacts.plain_classes) resolves to a class of a project module
        that has such bases itself."""
        imported = self.facts[path].plain_classes.get(name)
        if imported is None or (path, name) in seen:
            return False
        for base in imported:
            sources = [(target, ref.name) for target, ref in self.edges.get(path, ())
                       if ref.local == base and ref.name not in (None, "*")]
            if not sources or not all(self._plain_class(target, original, seen | {(path, name)})
                                      for target, original in sources if original is not None):
                return False
        return True

    def _native_importees(self, path: str) -> bool:
        """`path` or a module of its import closure builds native kernels, or imports a compiled extension the
        project names: every depth below the file (semseg's PSANet: the model, an ops package's functional
        module, the package's `__init__` star-importing the autograd Function, whose module imports the package
        that builds; five modules), and the imports in the file's own functions and under its conditions (the
        training script builds the model its arguments name). An import in a function of a module below it
        runs only when that function is called so (BigVGAN's generator imports its CUDA activation only under an
        inference-only option its training never sets): not followed."""
        reach = self._native_reach()
        if path in reach or any(t in reach for t in self._lazy_importees(path)):
            return True
        if self._extensions and any(_names_extension(ref, path, self._extensions)
                                    for ref in self.facts[path].lazy_imports):
            return True
        # the model comes from a caller (`train_one_epoch(model, ...)` of engine.py, the model built by main.py):
        # only where a module that caller imports hands a layer's 16-bit output to the native op's Function
        fed = self._fed_native_reach()
        if not fed:
            return False  # (most projects: no such module)
        importers = {self.paths[i] for i in self._direct_importers[self.index[path]]}
        importers.update(self.paths[i] for i in _members(self._lazy_importers.get(path, 0)))
        return any(importer in fed for importer in importers)

    def _fed_native_reach(self) -> frozenset[str]:
        """The files whose import closure at module level (as `_native_reach`) holds a module of the native reach
        whose `forward` hands what one of its linear or convolution layers returned to a custom autograd Function
        (FileFacts.forward_feeds_function_16_bit): under autocast the op behind it is handed a 16-bit tensor.
        Deformable DETR's engine.py steps the model main.py builds; main.py's closure reaches MSDeformAttn, whose
        forward hands `value_proj`'s output to MSDeformAttnFunction, which calls the compiled float-only kernel.
        RWKV's TimeX, handed `torch.exp(k)` and `k * v` (fp32 under autocast), is not such a module."""
        if self._fed_native is None:
            native = self._native_reach()
            self._fed_native = self._with_importers(
                {p for p in native if self.facts[p].forward_feeds_function_16_bit})
        return self._fed_native

    def _native_reach(self) -> frozenset[str]:
        """The files whose import closure at module level (every depth; conditional and `try` imports, relative
        imports and package `__init__` re-exports resolved by `resolve`) holds a file that builds native kernels
        or imports a compiled extension of the project's setup.py: one walk back from those files over their
        importers, for the whole project (a cycle is met once), not one walk forward per file."""
        if self._native is None:
            facts = self.facts
            self._native = self._with_importers(
                {p for p in self.paths if facts[p].native_kernels or (self._extensions and any(
                    _names_extension(ref, p, self._extensions) for ref in facts[p].imports))})
        return self._native

    def _with_importers(self, reached: set[str]) -> frozenset[str]:
        """`reached` and every file whose module-level import closure holds one of them: one walk back over the
        importers (a cycle is met once)."""
        pending = list(reached)
        while pending:
            for importer in self._direct_importers[self.index[pending.pop()]]:
                name = self.paths[importer]
                if name not in reached:
                    reached.add(name)
                    pending.append(name)
        return frozenset(reached)

    def _imported_cuda_devices(self, path: str) -> frozenset[str]:
        """The CUDA devices of project modules `path` imports (FileFacts.cuda_devices), as `path` spells them."""
        out: set[str] = set()
        for target, ref in self.edges.get(path, ()):
            devices = self.facts[target].cuda_devices
            if not devices or ref.name == "*":
                continue
            if ref.name is None:  # `import config as CFG`: `CFG.device`
                prefix = f"{ref.local}." if ref.local else f"{ref.module}."
                out.update(prefix + name for name in devices)
            elif _is_submodule(target, ref.name):  # `from pkg import config`: `config.device`
                out.update(f"{ref.local}.{name}" for name in devices)
            else:  # `from config import device` / `from config import CFG`: `device`, `CFG.device`
                out.update(ref.local + name[len(ref.name):] for name in devices
                           if name == ref.name or name.startswith(ref.name + "."))
        return frozenset(out)

    def _inherited_cuda(self, path: str) -> bool:
        """ProjectView.inherited_cuda: some class of `path` copies to `self.<attr>` (FileFacts.self_device_copies)
        that its project bases bind only to CUDA: each base a `from` import binds (FileFacts.plain_classes, so no
        base of unknown origin could bind it otherwise) is followed into its module and, when that class does not
        bind the attribute, on up its own bases, module after module to any depth (BasicSR's ESRGANModel ->
        SRGANModel -> SRModel -> BaseModel, blind20); every base that binds it binds it to CUDA, and one does."""
        own = self.facts[path]
        bound_here = {attr for attrs in own.self_devices.values() for attr in attrs}
        for name, bases in own.plain_classes.items():
            attrs = set(own.self_device_copies.get(name, ()))
            for base in bases:  # what the inherited methods copy to (ESRGANModel's step runs on SRModel's copies)
                attrs |= self._base_copies(path, base, frozenset()) - bound_here
            for attr in sorted(attrs):
                bound = [self._base_device(path, base, attr, frozenset()) for base in bases]
                if True in bound and False not in bound:
                    return True
        return False

    def _inherited_moves(self, path: str) -> dict[str, tuple[str, ...]]:
        """ProjectView.inherited_moves: for each class of `path` whose bases lead, through the file, to one name a
        `from` import binds (FileFacts.plain_classes), the moves the `__init__` of the class it resolves to makes
        (FileFacts.init_moves), where every module it may resolve to agrees."""
        out: dict[str, tuple[str, ...]] = {}
        for name, bases in self.facts[path].plain_classes.items():
            if len(bases) != 1:
                continue
            found = {self.facts[target].init_moves.get(ref.name, ()) for target, ref in self.edges.get(path, ())
                     if ref.local == bases[0] and ref.name not in (None, "*")}
            if len(found) == 1 and (moves := found.pop()):
                out[name] = moves
        return out

    def _returned_cuda(self, path: str) -> bool:
        """ProjectView.returned_cuda: some device the file copies to on a name bound only to calls of imported names
        (FileFacts.returned_device_targets) is an attribute that every one of those callees, resolved through the
        file's imports to a function or method of a project module, returns bound only to CUDA
        (FileFacts.cuda_returns); a callee that does not resolve so leaves it unknown."""
        own = self.facts[path]
        for target, callees in own.returned_device_targets.items():
            attr = target.split(".", 1)[1]
            if callees and all(self._returns_cuda(path, callee, attr) for callee in callees):
                return True
        return False

    def _returns_cuda(self, path: str, callee: str, attr: str) -> bool:
        """`callee` as `path` spells it ("OptInit.get_args", "config.get_config") names a function or method of a
        project module whose returned object has `attr` bound only to CUDA."""
        head, _, rest = callee.partition(".")
        for target, ref in self.edges.get(path, ()):
            if ref.name == "*" or target not in self.facts:
                continue
            local = ref.local or (ref.module if ref.name is None else "")
            if ref.name is None and not ref.local:  # `import pkg.config`: `pkg.config.get_config()`
                if not callee.startswith(local + "."):
                    continue
                name = callee[len(local) + 1:]
            elif head != local:
                continue
            elif ref.name is None or _is_submodule(target, ref.name):  # `import config as C`: `C.get_config`
                name = rest
            else:  # `from config import OptInit`: `OptInit.get_args`
                name = f"{ref.name}.{rest}" if rest else ref.name
            if name and f"{name}:{attr}" in self.facts[target].cuda_returns:
                return True
        return False

    def _base_copies(self, path: str, base: str, seen: frozenset[tuple[str, str]]) -> set[str]:
        """The attributes of `self` that the class `path` imports as `base`, or its project bases, copy tensors
        or modules to without binding them (FileFacts.self_device_copies), along plain classes."""
        out: set[str] = set()
        for target, ref in self.edges.get(path, ()):
            if ref.local != base or ref.name in (None, "*") or (target, ref.name) in seen:
                continue
            facts = self.facts[target]
            out.update(facts.self_device_copies.get(ref.name, ()))
            for inner in facts.plain_classes.get(ref.name, ()):
                out |= self._base_copies(target, inner, seen | {(target, ref.name)})
        return out

    def _base_device(self, path: str, base: str, attr: str, seen: frozenset[tuple[str, str]]) -> Optional[bool]:
        """Whether the class `path` imports as `base` binds `self.<attr>` only to CUDA (True), otherwise (False),
        or not at all along its bases (None). `seen`: the (module, class) pairs already on the way up; a
        class met again (an import cycle that resolves a name to the wrong class) is of unknown origin."""
        found: list[Optional[bool]] = []
        for target, ref in self.edges.get(path, ()):
            if ref.local != base or ref.name in (None, "*"):
                continue
            facts = self.facts[target]
            bound = facts.self_devices.get(ref.name, {}).get(attr)
            if bound is None and (target, ref.name) in seen:
                bound = False
            elif bound is None and ref.name in facts.plain_classes:
                inner = [self._base_device(target, b, attr, seen | {(target, ref.name)})
                         for b in facts.plain_classes[ref.name]]
                bound = False if False in inner else True if True in inner else None
            elif bound is None:
                bound = False  # a base whose own bases are not followed: it may bind the attribute
            found.append(bound)
        return False if False in found else True if True in found else None

    def _moved_returns(self, path: str) -> dict[str, tuple[str, ...]]:
        """What the files that import `path` directly do with the results of its functions they call
        (FileFacts.moved_results, keyed by the caller's spelling), keyed by the function's name here."""
        if self._consumers is None:  # module -> the files that import it directly and iterate some results
            self._consumers = {}
            for caller in self.paths:
                if self.facts[caller].moved_results:
                    for target in self._importees[caller]:
                        self._consumers.setdefault(target, []).append(caller)
        out: dict[str, set[str]] = {}
        for caller in self._consumers.get(path, ()):
            results = self.facts[caller].moved_results
            refs = [ref for target, ref in self.edges.get(caller, ()) if target == path]
            if not refs:
                continue
            devices: Optional[frozenset[str]] = None
            for key, kinds in results.items():
                spelled, bracket, slot = key.partition("[")
                function = next((f for f in (_function_of(spelled, ref, path) for ref in refs) if f), None)
                if function is None:
                    continue
                resolved = {k for k in kinds if not k.startswith((AT, HAND))}
                if any(not k.startswith(HAND) for k in kinds):
                    resolved.add(IN + caller)  # the caller copies the batches itself
                for handed in (k[len(HAND):] for k in kinds if k.startswith(HAND)):
                    resolved |= self._kept_by_class(caller, handed)
                named = {k[len(AT):] for k in kinds if k.startswith(AT)}
                if named:
                    devices = self._imported_cuda_devices(caller) if devices is None else devices
                    if named & devices:
                        resolved.add(CUDA)
                out.setdefault(function + bracket + slot, set()).update(resolved)
        return {key: tuple(sorted(kinds)) for key, kinds in sorted(out.items())}

    def _handed_moves(self, path: str) -> dict[str, tuple[str, ...]]:
        """ProjectView.handed_moves: FileFacts.parameter_moves of the project modules `path` imports, keyed by
        the function as `path` spells it."""
        return self._imported_moves(path, lambda facts: facts.parameter_moves, "#")

    def _handed_methods(self, path: str) -> dict[str, tuple[str, ...]]:
        """ProjectView.handed_methods: FileFacts.method_moves of the project modules `path` imports, keyed by the
        class as `path` spells it."""
        return self._imported_moves(path, lambda facts: facts.method_moves, ".")

    def _imported_moves(self, path: str, moves: Callable[[FileFacts], dict[str, tuple[str, ...]]],
                        separator: str) -> dict[str, tuple[str, ...]]:
        """A per-file moves fact keyed "<function or class><separator><rest>" of the project modules `path`
        imports, keyed by the name as `path` spells it; a key naming a parameter ("#") also says which file
        made the copy ("in:<file>")."""
        out: dict[str, tuple[str, ...]] = {}
        refs = self._imported_function_refs(
            path, lambda facts: tuple(sorted({k.partition(separator)[0] for k in moves(facts)})))
        for spelled, target, name in refs:
            for key, kinds in moves(self.facts[target]).items():
                owner, _, rest = key.partition(separator)
                if owner == name:
                    out[f"{spelled}{separator}{rest}"] = kinds if separator != "#" and "#" not in rest \
                        else tuple(sorted({*kinds, IN + target}))
        return dict(sorted(out.items()))

    def _kept_by_class(self, caller: str, handed: str) -> set[str]:
        """"Solver#1" as `caller` spells it: the copies the imported class makes of that constructor argument
        (FileFacts.member_moves of the file that defines it), with "in:<that file>"."""
        spelled, _, slot = handed.partition("#")
        for target, ref in self.edges.get(caller, ()):
            name = _function_of(spelled, ref, target)  # a class is named through its import like a function
            if name is None or target not in self.facts:
                continue
            kinds = self.facts[target].member_moves.get(f"{name}#{slot}")
            if kinds:
                return set(kinds) | {IN + target}
        return set()

    def _parts_of(self, *exported: dict[str, ClassFacts]) -> dict[str, ClassFacts]:
        """The model classes that the given classes build, transitively (keyed `path::Name`)."""
        out: dict[str, ClassFacts] = {}
        pending = [c for group in exported for c in group.values()]
        while pending and len(out) < 512:
            found = pending.pop()
            for layer in found.layers or ():
                if layer.kind == MODULE and PART in layer.name and layer.name not in out \
                        and layer.name in self.parts:
                    out[layer.name] = self.parts[layer.name]
                    pending.append(out[layer.name])
        return out

    def _bce_losses_around(self, path: str, callers: int) -> tuple[str, ...]:
        bce, near = self._bce_reach
        if not bce:
            return ()
        reach = self._closure(path, depth=2)
        for index in _members(callers & near):  # only the callers within two imports of such a loss
            caller = self.paths[index]  # a factory imports its losses in a function (`get_criterion`)
            reach |= {caller} | self._closure(caller, depth=2, lazy=True)
        reach.discard(path)
        return tuple(f"{p}::{name}" for p in sorted(reach & bce) for name in self.facts[p].bce_losses)

    @property
    def _bce_reach(self) -> tuple[frozenset[str], int]:
        """The files with a binary_cross_entropy loss (FileFacts.bce_losses), and the bit set of the files within
        two imports of one (in functions too), themselves included: computed once per project, so a file's view
        follows only the callers that may reach one."""
        if self._bce is None:
            bce = frozenset(p for p, facts in self.facts.items() if facts.bce_losses)
            near = sum(self._bit(p) for p in bce)
            for _ in range(2):
                for index in list(_members(near)):
                    target = self.paths[index]
                    near |= self._lazy_importers.get(target, 0)
                    for importer in self._direct_importers[index]:
                        near |= 1 << importer
            self._bce = (bce, near)
        return self._bce

    def _lazy_importees(self, path: str) -> set[str]:
        return {t for ref in self.facts[path].lazy_imports for t in self.resolve(path, ref) if t in self.facts}

    def _closure(self, path: str, depth: int, lazy: bool = False) -> set[str]:
        """The modules `path` imports, `depth` levels deep; with `lazy`, the imports in functions too
        (FileFacts.lazy_imports)."""
        seen: set[str] = set()
        frontier = {path}
        for _ in range(depth):
            reached = {t for p in frontier for t in self.importees(p)}
            if lazy:
                reached |= {t for p in frontier for t in self._lazy_importees(p)}
            frontier = reached - seen - {path}
            if not frontier:
                break
            seen |= frontier
        return seen

    def _star_modules(self, path: str) -> dict[str, str]:
        """What the project modules a file star-imports bound by their own absolute imports: the names
        `from m import *` hands on (without `__all__`, every public name, imported modules included)."""
        stars = [ref for ref in self.facts[path].imports if ref.name == "*"]
        if not stars:
            return {}
        reached = [(target, ref) for target, ref in self.edges.get(path, ()) if ref.name == "*"]
        if len({(ref.module, ref.level) for _, ref in reached}) < len({(r.module, r.level) for r in stars}):
            return {}  # a star import of a library: it may bind any name
        found: dict[str, Optional[str]] = {}
        for target, _ in reached:
            for ref in self.facts[target].imports:
                if ref.level or ref.name == "*" or not ref.local or ref.local.startswith("_"):
                    continue
                qualified = ref.module if ref.name is None else f"{ref.module}.{ref.name}"
                found[ref.local] = qualified if found.get(ref.local, qualified) == qualified else None
        return {name: qualified for name, qualified in found.items() if qualified is not None}

    def _visible(self, path: str) -> tuple[dict[str, ClassFacts], dict[str, ClassFacts], dict[str, tuple[str, ...]]]:
        """Dataset classes and optimizer registries the file imports from the project, keyed as spelled."""
        classes: dict[str, ClassFacts] = {}
        optimizers: dict[str, tuple[str, ...]] = {}
        star: dict[str, ClassFacts] = {}
        for target, ref in self.edges.get(path, ()):
            module_facts = self.facts[target]
            spelled_module = "." * ref.level + ref.module
            exported = self._exported_datasets(target)
            if ref.name == "*":
                for name, facts in exported.items():
                    star.setdefault(name, facts)
                continue
            if ref.name is None:  # `import pkg.data as d` / `import pkg`: reached as `pkg.data.Class`
                for name, facts in exported.items():
                    classes[f"{spelled_module}.{name}"] = facts
                for name, found in module_facts.optimizers.items():
                    optimizers[f"{spelled_module}.{name}"] = found
                continue
            spelled = f"{spelled_module}.{ref.name}" if ref.module else "." * ref.level + ref.name
            if ref.name in exported:
                classes[spelled] = exported[ref.name]
            if _is_submodule(target, ref.name):  # `from pkg import data`: a submodule
                for name, facts in exported.items():
                    classes[f"{spelled}.{name}"] = facts
            if ref.name in module_facts.optimizers:
                optimizers[spelled] = module_facts.optimizers[ref.name]
        return classes, star, optimizers

    def _global_class(self, path: str, name: str) -> ClassFacts:
        """The class with the classes its layers build renamed to project-wide keys (`path::Name`),
        resolved in the file that defines it; the ones that resolve are kept in `self.parts`."""
        key = part_key(path, name)
        if key in self.parts:
            return self.parts[key]
        found = self.facts[path].classes[name]
        self.parts[key] = found  # a cycle sees the unrenamed class (its unresolved parts read as unknown)
        if found.layers is None or not any(layer.kind == MODULE for layer in found.layers):
            return found
        layers = []
        for layer in found.layers:
            if layer.kind == MODULE:
                target = self._class_target(path, layer.name)
                if target is not None and len(self.parts) < 4096:
                    self._global_class(*target)
                    layer = replace(layer, name=part_key(*target))
            layers.append(layer)
        self.parts[key] = replace(found, layers=tuple(layers))
        return self.parts[key]

    def _class_target(self, path: str, spelled: str) -> Optional[tuple[str, str]]:
        """(file, class name) of a class `path` spells as a local name or as an import target."""
        facts = self.facts[path]
        if spelled in facts.classes and facts.classes[spelled].module:
            return path, spelled
        for target, ref in self.edges.get(path, ()):
            if ref.name in (None, "*"):
                continue
            written = "." * ref.level + (f"{ref.module}.{ref.name}" if ref.module else ref.name)
            if written == spelled and ref.name in self.facts[target].classes:
                return target, ref.name
        return None

    def _exported_datasets(self, path: str) -> dict[str, ClassFacts]:
        """Dataset and model classes a module offers by name: its own top-level ones, the functions that
        return one of its dataset classes (factories), and those it imports from project modules.

        The modules of an import cycle are solved together, from nothing, until what they offer stops
        changing: the answer never depends on which module of the cycle was asked first (and so a file's
        view does not depend on which other files were linted in the same run)."""
        cached = self._exported.get(path)
        if cached is not None:
            return cached
        cycle = self._cycles.get(path)
        if cycle is None:
            self._exported[path] = {}
            self._exported[path] = self._offered(path)
            return self._exported[path]
        for member in cycle:
            self._exported[member] = {}
        for _ in range(len(cycle) + 2):  # each round can only pass names one module further round the cycle
            before = {member: self._exported[member] for member in cycle}
            for member in cycle:
                self._exported[member] = self._offered(member)
            if all(self._exported[member] == before[member] for member in cycle):
                break
        return self._exported[path]

    def _offered(self, path: str) -> dict[str, ClassFacts]:
        """What `path` offers, given what the modules it imports offer (`_exported_datasets`)."""
        out: dict[str, ClassFacts] = {}
        for target, ref in self.edges.get(path, ()):
            if ref.name == "*":
                for name, cls in self._exported_datasets(target).items():
                    out.setdefault(name, cls)
            elif ref.name is not None:
                found = self._exported_datasets(target).get(ref.name)
                if found is not None:
                    out[ref.local] = found
        own = self.facts[path]
        out.update({name: self._global_class(path, name) for name, cls in own.classes.items()
                    if (cls.dataset is not None or cls.module) and "." not in name})
        out.update({name: own.classes[key] for name, key in own.factories.items() if key in own.classes})
        for name, key in own.factories.items():  # a factory returning a class this module imports
            if key not in own.classes and key in out:
                out[name] = out[key]
        return out


PART = "::"  # "models/gcn.py::GraphConvolution": a model class keyed by its file, for the classes it builds


def _words_imported(facts: Iterable[FileFacts]) -> set[str]:
    """Every module name part and imported name the imports of these files spell: a file whose stem is
    among them may be imported in a way the resolver cannot follow (`sys.path` tricks, another root)."""
    return {word for f in facts for ref in f.imports for word in (*ref.module.split("."), ref.name or "")}


def module_stem(path: str) -> str:
    """The name an import would spell for the module file `path` (relative, posix)."""
    return path.rpartition("/")[2].rsplit(".", 1)[0]


def package_init(path: str) -> str:
    """The `__init__.py` that would make the folder of `path` (relative, posix) a package."""
    folder = path.rpartition("/")[0]
    return f"{folder}/__init__.py" if folder else "__init__.py"


def part_key(path: str, name: str) -> str:
    return f"{path}{PART}{name}"


def _members(bits: int) -> Iterator[int]:
    """The indexes of the set bits, lowest first (cheap when few are set)."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


def _function_of(spelled: str, ref: ImportRef, target: str) -> Optional[str]:
    """The top-level function of `target` that a call spelled `spelled` names through the import `ref`."""
    if ref.name == "*":  # `from utils import *`: a name the caller binds nowhere (loader_flow.STAR)
        rest = spelled[len(STAR):] if spelled.startswith(STAR) else ""
        return rest if rest and "." not in rest else None
    if spelled.startswith(STAR):
        return None
    if ref.name is None:  # `import utils` / `import data.loaders as dl` / `import data.loaders`
        prefix = f"{ref.local}." if ref.local else f"{ref.module}."
    elif _is_submodule(target, ref.name):  # `from data import loaders`: `loaders.get_loader`
        prefix = f"{ref.local}."
    else:  # `from utils import get_loader as gl`: `gl`
        return ref.name if spelled == ref.local else None
    rest = spelled[len(prefix):] if spelled.startswith(prefix) else ""
    return rest if rest and "." not in rest else None


def _is_submodule(target: str, name: str) -> bool:
    """`from pkg import name` resolved to the file of the submodule `name` (not a name inside pkg)."""
    return target.endswith((f"/{name}.py", f"/{name}/__init__.py")) or target in (f"{name}.py", f"{name}/__init__.py")


def _strongly_connected(graph: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm without recursion; components come out in reverse topological order."""
    index_of = [-1] * len(graph)
    low = [0] * len(graph)
    on_stack = [False] * len(graph)
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for start in range(len(graph)):
        if index_of[start] != -1:
            continue
        work = [(start, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index_of[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            recurse = False
            successors = graph[node]
            while edge < len(successors):
                other = successors[edge]
                edge += 1
                if index_of[other] == -1:
                    work.append((node, edge))
                    work.append((other, 0))
                    recurse = True
                    break
                if on_stack[other]:
                    low[node] = min(low[node], index_of[other])
            if recurse:
                continue
            if low[node] == index_of[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def scan_files(root: Path, paths: Iterable[Path], facts_for: "FactsSource",
               existing: Optional[Iterable[str]] = None, import_words: Optional[set[str]] = None,
               accelerated: Optional[bool] = None) -> Project:
    """A project from the given files under `root`; `facts_for` reads (or recalls) each one's facts.
    `existing`, `accelerated`: see `Project` (the given files are then only those some views read)."""
    facts: dict[str, FileFacts] = {}
    for path in paths:
        relative = relative_to(root, path)
        if relative is None:
            continue
        found = facts_for(path)
        if found is not None:
            facts[relative] = found
    return Project(root, facts, existing, import_words, accelerated)


# frameworks whose import alone says the run places the model on a device of their choice
_DEVICE_FRAMEWORKS = frozenset({"lightning", "pytorch_lightning", "accelerate", "deepspeed"})


def own_accelerated(facts: FileFacts) -> bool:
    """The file shows an accelerator: GPU evidence, MPS or XPU named, a framework that picks the device
    (called or imported), or a copy to a device it names (`.to(device)`)."""
    return facts.gpu or bool(facts.devices) or facts.device_moved or any(
        ref.level == 0 and ref.module.split(".", 1)[0] in _DEVICE_FRAMEWORKS for ref in facts.imports)


def relative_to(root: Path, path: Path) -> Optional[str]:
    """`path` as a posix path relative to `root` (how a project names its files), or None outside it."""
    absolute, base = os.path.abspath(path), str(root)
    if os.path.isabs(base) and not base.endswith(os.sep) and absolute.startswith(base + os.sep):
        return absolute[len(base) + 1:].replace(os.sep, "/")  # plain strings: called once per project file
    try:
        return Path(os.path.abspath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


_VIEW_FIELDS = tuple(f.name for f in fields(ProjectView) if f.name != "own")


_LEAVES = frozenset({str, int, bool, float, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass's fields, by its type (read once per type)


def _plain(value: object) -> object:
    """JSON-ready data with sets sorted, for a fingerprint."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    names = _FIELD_NAMES.get(kind)
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted(_plain(item) for item in value)  # type: ignore[type-var]
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


class FactsSource:
    """Reads a file's facts, from a cache of earlier runs when its bytes are unchanged."""

    def __call__(self, path: Path) -> Optional[FileFacts]:  # pragma: no cover - interface
        raise NotImplementedError
