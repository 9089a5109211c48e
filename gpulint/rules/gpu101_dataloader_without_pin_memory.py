"""GPU101 dataloader-without-pin-memory: host-to-device copies stay synchronous."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import AstContext, AstKeywordArgs, Detection, positional_args
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence, Premise, all_of
from gpulint.analysis.loaders import (
    MANY_BATCHES,
    UNATTENDED,
    BatchUse,
    Copies,
    LoaderCall,
    asynchronous_after_fix,
    batch_copies,
    dataloader_call,
    draws_few_batches,
    loader_batches,
    paced_by_a_person,
)
from gpulint.analysis.reach import (
    FEEDS_TRAINING,
    SELF_TEST,
    feeds_training,
    not_self_test,
)
from gpulint.core import floors
from gpulint.core.edits import Applicability
from gpulint.core.torch_api import DATALOADER_AST_NEEDLES, DATALOADER_NEEDLES, DATALOADER_PIN_MEMORY
from gpulint.core.verification import NEUTRAL, Verification
from gpulint.project.facts import IN_MEMORY, NOTHING, ON_DEVICE, WORK
from gpulint.project.loader_flow import CUDA, MOVED
from gpulint.rules.base import FixCase, Rule, RuleDocs, Target

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.core.pending import PendingFix

PIN_MEMORY_POSITION = DATALOADER_PIN_MEMORY[1]

CPU_TENSORS = Premise(
    "cpu-tensors",
    "the loader's items are dense CPU tensors: read from the dataset's class (in this file, nested in a "
    "function, returned by a factory, or imported from the project), a TensorDataset of CPU tensors (also the "
    "parts of a `random_split` unpacked into names: `fit, held = random_split(ds, ...)`), a list built up front, "
    "a torchvision or Hugging Face dataset (also through a name each binding of which is such a class: "
    "`cls = CIFAR10` on one branch, `cls = CIFAR100` on another). Refuted by tensors already on a device (also "
    "batches a `collate_fn` moves there: a function of the file or of a project module, a lambda calling one or "
    "`functools.partial` of one, whose own code or a function of its file it calls makes `.to(device)`, `.cuda()` "
    "or `torch.tensor(..., device=...)`, as a Dataset class's items are judged: LoRA's bertabs, blind11), items "
    "without tensors (prompts, indices from `range(n)` or `idx.tolist()`, a `collate_fn` returning strings), "
    "batches for JAX, and a `collate_fn` whose container the pin thread cannot pin. A parameter of a function "
    "of the file (never rebound) is each value its calls pass, when the def is its name's only binding and every "
    "use of that name calls it with the parameter (XMem's nested `construct_loader(dataset)`, blind25); the "
    "first part of `ConcatDataset([a] * 5 + [b])` stands for it. Any other unknown dataset (a parameter, a "
    "class gpulint cannot read) is undecided.")
REACHES_CUDA = Premise(
    "reaches-cuda",
    "the batches are copied to a CUDA GPU: a loop over the loader (directly, through the name or `self.` "
    "attribute it is stored in, a function it is returned from or handed to, `enumerate`/`tqdm`/`next`) moves"
    " them with `.to(...)`/`.cuda()` (also at once: `next(it).to(device)`), or Accelerate/Lightning moves them, "
    "in code with CUDA evidence. A generator function of the file the loader is handed to, whose loop over it "
    "yields the batches or names taken from them as they are (`for x, y in loader: yield x`), hands them on: "
    "what that call's result is then iterated or drawn with, and copied by, counts (not the other calls of the "
    "generator, nor a yield of what a helper makes of the batch). A "
    "loader a top-level function returns (whole, in a tuple or under a dict key) counts as moved when a "
    "module importing that function (by name, or with `from module import *`) iterates the result and copies "
    "the batches there or in a function of that module it hands them to (also after keeping it under a constant "
    "key of a dict bound once, read under that key or a loop variable that takes it: `loaders[\"tar\"] = "
    "load(...)`, then `for x, y in loaders[phase]`), or hands the loader to an imported "
    "class whose constructor keeps it on `self` and whose methods copy its batches (`Solver(config, "
    "train_loader)`). A loader handed to a function of a project module the file imports, whose own loop over "
    "that parameter (or that of a function of its module it hands it on to) copies the batches, counts too "
    "(`train(model, train_loader, eval_loader)`; a name several imports bind, on different branches, only "
    "when every one leads to such a function: ban-vqa, blind24). So does a batch (or a part of it) a loop "
    "hands to a method of a name bound only to instances of a class of a project module the file imports "
    "(`model = Trainer(...)`, also `Trainer(...).train()` through its methods that return `self`), when that "
    "class's own method copies the parameter, or its items (`for k, v in data.items(): data[k] = "
    "v.cuda(non_blocking=True)`), to a device: XMem's `model.do_pass(data, it)`, blind25; a copy to a device a "
    "project module the "
    "copying file imports binds to CUDA (`x.to(CFG.device)`, config.py's `device = torch.device(\"cuda\" if"
    " ... else \"cpu\")`), that project base classes bind so (`self.device`), or that a project function "
    "binds so on the options it returns (`opt.device` for `opt = OptInit().get_args()`: GPU001's on-gpu) is "
    "CUDA evidence. Refuted in code that only picks the CPU, MPS (which ignores "
    "pinning), XPU or a TPU.")
PAYS_OFF = Premise(
    "pays-off",
    "pinning pays off for these batches: their copy is asynchronous, or out of view and large. Shown when a "
    "move already asks for `non_blocking=True` (or Lightning moves them, or Accelerate with a "
    "`DataLoaderConfiguration(non_blocking=True)` the file builds); or, for items that are decoded images, "
    "audio or arrays (also parts of an array a dataset class reads up front from an HDF5 file, `with "
    "h5py.File(p) as hf: self.features = ...` then `self.features[i]`), when the fix makes every copy of "
    "the batches to a device in this file asynchronous (the `.to(device)` / `.cuda()` in the loops over the "
    "loader, also in a function of the file it is handed to "
    "through up to three calls; a dtype cast is no copy of the batch, nor is the copy of a value computed "
    "from it or of a tensor built beside it), or when the file makes no copy of them (a module importing "
    "it, or code gpulint does not see, copies them: judged by the items). Undecided while a copy in this "
    "file stays blocking after the fix (its result read on the host right away, the `.to()` of a batch "
    "object a `collate_fn` built, `next(it).to(device)`, a copy in a comprehension over the batch, a loop "
    "over an unnamed `DataLoader(...)`, or copies in an importing module as well), and for Accelerate's "
    "default copy, which is blocking (the note names "
    "`DataLoaderConfiguration(non_blocking=True)`, accelerate >= 0.28): a pinned synchronous copy of a few "
    "MB saves a fraction of a millisecond a step (cloneofsimo/lora's and fxia22/pointnet.pytorch's, "
    "blind12). Undecided too for other items that are not decoded (a few KB), unless a copy already asks for "
    "`non_blocking=True`. Refuted for items a tokenizer made, whatever the copy: a dataset class (of this file "
    "or imported from the project) every item of which holds only what a tokenizer returns (a call spelled "
    "with `tokeniz`: `self.tokenizer(text)`, `tokenizer.encode(...)`, a `tokenize(...)` function), in "
    "`__getitem__` or into a `self.` attribute up front, taken, cut, cast, padded or masked (`input_ids`, "
    "`attention_mask`, `labels` with `ignore_index`), beside literals, lengths and the item's index (project/"
    "token_items.py). At 8 bytes a token a batch is a few KB to ~100 KB, copied in microseconds pinned or "
    "not against the forward pass those tokens feed (lit-gpt's SFTDataset, blind18: \"true but worth "
    "nothing\"). Token ids gpulint cannot trace to a tokenizer (a tensor loaded from a file) stay undecided, "
    "and a decoded image beside the ids (a caption's `input_ids` and its `pixel_values`) makes the items no "
    "longer token ids only.")

PIN_THREAD = Premise(
    "pin-thread",
    "the batches are pinned beside the training, by the pin thread of a loader with workers. Refuted by an "
    "explicit `num_workers=0`: the single-process iterator pins each batch in the training loop's own thread, "
    "an extra host copy on the step's path (the pin_memory tutorial: \"can be up to twice as slow\"), and the "
    "user chose to load there (GPU102 leaves that choice alone too). A loader that does not pass `num_workers` "
    "counts as having them: GPU102 reports it and its fix adds workers.")


class DataLoaderPinMemory(Rule):
    code = "GPU101"
    name = "dataloader-without-pin-memory"
    habit = "data-loading"
    summary = "DataLoader without pin_memory=True"
    impact = "asynchronous host-to-device copies (PyTorch Tuning Guide)"
    needles = DATALOADER_NEEDLES
    ast_needles = DATALOADER_AST_NEEDLES
    target = Target.NOT_CPU_ONLY
    in_tests = False
    fix = Applicability.SAFE
    fix_detail = "safe (dataset known to yield CPU tensors); unsafe (otherwise)"
    verification = Verification(NEUTRAL, ("dataloader",), "the DataLoader with pin_memory=True yields batches",
                                lambda kind, details: details.get("pin_memory") is True)
    docs = RuleDocs(
        what="""
        Checks for `torch.utils.data.DataLoader(...)` calls that do not pass `pin_memory`,
        in files that are not explicitly CPU-only.
        """,
        why="""
        Batches in pageable host memory are first copied by the driver into a pinned
        staging buffer, and the copy to the GPU cannot overlap compute: the training
        step waits for it. With `pin_memory=True` the loader's pin thread page-locks each
        batch, so `.to(device, non_blocking=True)` copies asynchronously over DMA. The
        PyTorch Performance Tuning Guide lists it among the first data-loading fixes; the
        pin_memory/non_blocking tutorial measures pinned copies well ahead of pageable
        ones (pinning in the main thread instead "can be up to twice as slow").
        On a machine without a GPU, `pin_memory=True` is a no-op with a warning.
        """,
        example="""
        import torch
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        device = torch.device("cuda")
        loader = DataLoader(ImageFolder(root), batch_size=64, shuffle=True)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
        """,
        use_instead="""
        import torch
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        device = torch.device("cuda")
        loader = DataLoader(ImageFolder(root), batch_size=64, shuffle=True, pin_memory=True)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        """,
        fix_safety="""
        Adds `pin_memory=True`, and `non_blocking=True` to the copies of the loader's batches to
        the GPU, so that they run asynchronously (pinning alone leaves them synchronous and buys
        little): the `.to(device)` / `.cuda()` calls on the batch, its parts and what is unpacked
        from it, inside the loops over the loader in the file, also in a function of the file the
        loader is passed to (through up to three calls). Never a `.cpu()` or `.to("cpu")`, a dtype cast, a copy whose
        result is read on the host in the loop (`.item()`, `.tolist()`, `.numpy()`, `print()`),
        or `.to()` on a whole batch a `collate_fn` built (its own `.to()` may lack
        `non_blocking`). Where gpulint sees no such copy, the finding's note says what to add.
        Results are unchanged. Safe when the dataset is known to yield
        CPU tensors: a dataset class gpulint reads (in this file or another file of the
        project), unless its items hold values its constructor was handed as they are and the
        call passes them more than literals or command-line options; a TensorDataset of CPU
        tensors; torchvision and Hugging Face datasets. Otherwise unsafe: pinning CUDA tensors
        (DreamBooth's prompt embeddings, precomputed on the GPU and put into every item) raises
        "cannot pin 'torch.cuda.FloatTensor'", and gpulint cannot see which kind it is. Pinned memory is
        page-locked host RAM, so on hosts short of RAM with very large batches review the
        change. Not reported when the dataset visibly holds tensors on the GPU (`.to(device)`
        or `device=` when built, also through the names it is built from), when the `collate_fn`
        moves the batch there itself (in its own code or a function of its file it calls), when its items
        carry no tensors (a prompt and an index), when they are only token ids a tokenizer made (a few KB a
        batch), for batches that feed JAX, for a loader used
        for one batch (`next(iter(DataLoader(...)))`), when the `collate_fn` comes from a module that
        defines a batch container with `.to()` but no `.pin_memory()` (DETR's NestedTensor: the pin
        thread passes it through unpinned), on a TPU (`torch_xla`), for a loader only an interactive viewer
        iterates (every batch waits for a key press: `cv2.waitKey(0)`), or in test files.
        """,
        premises=(CPU_TENSORS, REACHES_CUDA, PAYS_OFF, PIN_THREAD, MANY_BATCHES, UNATTENDED, FEEDS_TRAINING,
                  SELF_TEST),
        fix_cases=(
            FixCase("a dataset known to yield CPU tensors (a class read here, a CPU TensorDataset, torchvision, "
                    "Hugging Face): `pin_memory=True`",
                    Applicability.SAFE, "known_cpu_datasets_safe_fix.py"),
            FixCase("the loop's copies of its batches to the GPU get `non_blocking=True` (host-to-device only: never "
                    "`.cpu()`, a dtype cast, or a value read on the host right after)",
                    Applicability.SAFE, "copies_made_asynchronous.py"),
            FixCase("the same in the function of the file the loader is passed to",
                    Applicability.SAFE, "copies_in_the_function_the_loader_is_passed_to.py"),
            FixCase("a dataset gpulint cannot see (pinning CUDA tensors raises)",
                    Applicability.UNSAFE, "basic.py"),
            FixCase("a dataset class whose items hold values its constructor was given (their device is the caller's)",
                    Applicability.UNSAFE, "dataset_holding_constructor_values_unsafe_fix.py"),
            FixCase("such a class given only constants (numbers, strings, None) for those values",
                    Applicability.SAFE, "dataset_holding_constants_safe_fix.py"),
        ),
    )

    def _collate_returns_unpinnable(self, ctx: AstContext, kwargs: AstKeywordArgs) -> bool:
        """`collate_fn=` a function of a module that defines a batch container without `pin_memory()`."""
        collate = kwargs.get("collate_fn") if kwargs.passed("collate_fn") else None
        if collate is None:
            return False
        project = ctx.project
        if isinstance(collate, ast.Name) and ctx.names.binding_scope(collate) is ctx.names.module_scope \
                and collate.id in project.own.unpinned_collates:
            return True
        return ctx.qualname(collate) in project.unpinned_collates

    def _cpu_tensors(self, ctx: AstContext, loader: LoaderCall) -> Evidence:
        kind = loader.dataset_kind
        if kind in (ON_DEVICE, NOTHING):
            return REFUTED  # tensors already on a device (pinning them raises), or no tensor at all
        if kind is None and loader.dataset_undefined:
            return REFUTED  # a dataset class the file neither defines nor imports: not torch data we can see
        if ctx.project.own.jax:
            return REFUTED  # batches feed JAX as NumPy arrays: torch's pinned memory does not reach them
        if self._collate_returns_unpinnable(ctx, loader.kwargs):
            return REFUTED  # the pin thread passes the batch's container through unpinned
        if kind in (IN_MEMORY, WORK) or loader.library_dataset:
            return SHOWN
        return UNDECIDED

    def _pays_off(self, ctx: AstContext, batches: BatchUse, copies: Copies, alternatives: list[LoaderCall]) \
            -> Evidence:
        """A copy already asynchronous; or decoded images, audio or arrays whose every copy in view the fix
        makes asynchronous. A copy that stays blocking (Accelerate's, another module's, one read on the host)
        gains a fraction of a millisecond per few-MB batch: undecided, as are batches of unknown items. Items
        a tokenizer made (8 bytes a token) are copied in microseconds pinned or not: refuted."""
        if all(each.token_ids for each in alternatives):
            return REFUTED  # lit-gpt's SFTDataset (blind18): "true but worth nothing", even copied asynchronously
        if batches.non_blocking:
            return SHOWN
        if not all(each.bulk for each in alternatives) or batches.framework == "accelerate" \
                or copies.mover == "accelerate":
            return UNDECIDED  # token ids; Accelerate's default copy is blocking
        if batches.moves or copies.calls:  # copies in this file: the fix must make every one asynchronous
            return SHOWN if asynchronous_after_fix(ctx, batches, copies) else UNDECIDED
        return SHOWN  # copied out of this file's view (another module, a framework): judged by the items

    def detect(self, ctx: AstContext) -> None:
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            self._check(ctx, node)

    def _check(self, ctx: AstContext, node: ast.Call) -> None:
        loader = dataloader_call(ctx, node)
        name, position = DATALOADER_PIN_MEMORY
        if loader is None or loader.kwargs.passed(name):
            return
        if len(positional_args(node) or []) > position:
            return
        alternatives = loader.alternatives()  # the dataset may be one of several (branches): all must agree
        cpu_tensors = all_of(*(self._cpu_tensors(ctx, each) for each in alternatives))
        if cpu_tensors is REFUTED:
            return
        device = cuda_evidence(ctx.project)
        batches = loader_batches(ctx, node)
        if device is UNDECIDED and CUDA in batches.elsewhere:
            device = SHOWN  # the module that iterates what a function returns copies to CUDA
        # the copies the fix makes asynchronous, also in a function the loader is passed to
        custom_collate = loader.kwargs.passed("collate_fn")
        copies = batch_copies(ctx, node, custom_collate=custom_collate)
        moved = SHOWN if batches.moves or batches.framework or copies.calls or MOVED in batches.elsewhere \
            else UNDECIDED
        pays = self._pays_off(ctx, batches, copies, alternatives)
        decision = self.decide({CPU_TENSORS: cpu_tensors, REACHES_CUDA: all_of(device, moved), PAYS_OFF: pays,
                                 PIN_THREAD: REFUTED if loader.no_workers_chosen else SHOWN,
                                 MANY_BATCHES: REFUTED if draws_few_batches(ctx, loader) else SHOWN,
                                 UNATTENDED: REFUTED if paced_by_a_person(ctx, node) else SHOWN,
                                 FEEDS_TRAINING: feeds_training(ctx, node),
                                 SELF_TEST: not_self_test(ctx.tree, node, ctx.parent, ctx.project.imported)})
        if not decision.report:
            return
        what = "Add `pin_memory=True`"
        note = ""
        if copies.calls:
            count = len(copies.calls)
            what += (f", and `non_blocking=True` to the {count} cop{'ies' if count > 1 else 'y'} of its batches "
                     f"to the GPU in {' and '.join(copies.where)}")
        elif copies.mover == "accelerate":
            if not batches.non_blocking:
                note = ("Accelerate copies its batches to the GPU: pass dataloader_config=DataLoaderConfiguration("
                        "non_blocking=True) to Accelerator() (accelerate >= 0.28) so that the copies run "
                        "asynchronously")
        elif batches.consumers and not copies.mover:  # copied in the modules that iterate what a function returns
            if not batches.non_blocking:
                places = (["this file"] if batches.moves else []) + list(batches.consumers)
                note = (f"its batches are copied to the GPU in {' and '.join(places)}: pass "
                        "non_blocking=True to the .to(device) / .cuda() calls there")
        elif not copies.mover:  # Lightning and Fabric copy batches with non_blocking=True themselves
            note = ("gpulint sees no copy of its batches to the GPU in this file: pass non_blocking=True to the "
                    ".to(device) / .cuda() calls that make them")
        too_new = floors.too_new(ctx.settings.torch_version, [floors.PIN_MEMORY, floors.NON_BLOCKING])
        fix: Optional[Applicability] = None
        message = ""
        if too_new is not None:
            note = f"no fix: {too_new.reason()}"
        elif any(each.hands_over_values for each in alternatives):
            # DreamBooth's dataset puts the prompt embeddings it was given into every item: computed on
            # the GPU when they are precomputed, and pinning them raises
            fix = Applicability.UNSAFE
            message = (f"{what}; unsafe: the dataset's items hold values its constructor was given, whose device "
                       "gpulint cannot see, and pinning CUDA tensors raises")
        elif all(each.dataset_kind in (IN_MEMORY, WORK) or each.library_dataset for each in alternatives):
            fix, message = Applicability.SAFE, what
        else:  # pin_memory=True raises "cannot pin 'torch.cuda.FloatTensor'" on a dataset of CUDA tensors
            fix = Applicability.UNSAFE
            message = (f"{what}; unsafe: gpulint cannot see that the dataset yields CPU tensors, and pinning CUDA "
                       "tensors raises")
        ctx.report(self, node, "DataLoader without pin_memory=True: its batches' copies to the GPU cannot run "
                               "asynchronously", fix=fix, fix_message=message,
                   data={"custom_collate": custom_collate, "copies": len(copies.calls)}, note=note, decision=decision)

    def build_fix(self, detection: Detection, fctx: "FileContext", node: "cst.CSTNode") -> Optional["PendingFix"]:
        import libcst as cst

        from gpulint.core.pending import PendingFix, Replace
        from gpulint.core.rewrite import add_keyword
        from gpulint.rewrites.async_copies import batch_copies as cst_batch_copies
        from gpulint.rewrites.async_copies import copy_edits

        assert isinstance(node, cst.Call) and detection.fix is not None and detection.data is not None
        # the copies are found again on LibCST, where their edits are made (analysis/loaders.py found them on
        # `ast` for the message; the prediction test checks that both agree)
        copies = cst_batch_copies(fctx, node, custom_collate=detection.data["custom_collate"])
        if len(copies.calls) != detection.data["copies"]:
            return None
        edits = [Replace(node, add_keyword(node, "pin_memory", "True")), *copy_edits(fctx, copies)]
        return PendingFix(detection.fix, detection.fix_message, tuple(edits))
