"""The oldest torch each symbol a fix writes needs: one table, read by every fix and by the docs.

A fix names the symbols it would write; with the project's torch floor (`torch-version`, or the
floor its packaging declares) below one of them, the fix is not offered and the finding says
which symbol needs which torch. Versions come from the source of each torch wheel, 1.13.1
through 2.14.1 (docs/pytorch-performance-facts.md, section 2): a symbol present in 1.13.1 and
older is listed at the release that introduced it where that is known, else at 1.13.
`docs/fix-safety.md` prints this table (scripts/update_docs.py).
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

from gpulint.records import dataclass

Version = tuple[int, int]


@dataclass(frozen=True)
class Symbol:
    code: str  # as the docs print it
    since: Version
    note: str = ""


# every symbol a gpulint fix may write, and the oldest torch that has it
SYMBOLS: dict[str, Symbol] = {s.code: s for s in (
    Symbol("torch.autocast(device_type=..., dtype=...)", (1, 10),
           "also GPU003's rename of torch.cuda.amp.autocast where the floor is 1.10 or 1.11 (no torch.amp)"),
    Symbol("torch.amp.autocast", (1, 12), "GPU003's rename of torch.cuda.amp.autocast; 1.10 and 1.11 have "
           "torch.autocast but no torch.amp package (the 1.11.0 wheel's file list; the facts doc says 1.10)"),
    Symbol("torch.amp.GradScaler", (2, 3), "with a device type argument; CPU included"),
    Symbol("torch.amp.custom_fwd / custom_bwd(device_type=...)", (2, 4)),
    Symbol("ShardedGradScaler(device, ...)", (2, 1),
           "torch.distributed.fsdp.sharded_grad_scaler; older ones take init_scale first (not in the "
           "facts doc: from the 2.1 release, not read from a wheel)"),
    Symbol("torch.cuda.is_bf16_supported(including_emulation=False)", (2, 3),
           "False on GPUs that only emulate bfloat16 (T4, V100); amp-dtype \"auto\" writes it (not in "
           "the facts doc: 2.3 added the emulation it excludes, not read from a wheel)"),
    Symbol("Adam(fused=True)", (1, 13), "CUDA; CPU from 2.4"),
    Symbol("AdamW(fused=True)", (2, 0), "CUDA; CPU from 2.4"),
    Symbol("SGD(fused=True)", (2, 3), "CUDA; CPU from 2.4"),
    Symbol("Adagrad(fused=True)", (2, 12), "CPU from 2.4, CUDA from 2.12"),
    Symbol("fused=True on CPU parameters", (2, 4), "Adam, AdamW, SGD and Adagrad; a fused optimizer whose "
           "parameters may be on the CPU needs it"),
    Symbol("checkpoint(..., use_reentrant=False)", (1, 13),
           "also checkpoint_sequential; 1.13.1 is the oldest wheel read"),
    Symbol("DataLoader(pin_memory=True)", (0, 4), "older than 0.4 too; 0.4 is the oldest torch gpulint vouches for"),
    Symbol("DataLoader(num_workers=...)", (0, 4), "older than 0.4 too"),
    Symbol("DataLoader(persistent_workers=True)", (1, 7)),
    Symbol("Tensor.to(..., non_blocking=True) / .cuda(non_blocking=True)", (0, 4),
           "0.4 added `.to()` and renamed `.cuda(async=)` to `non_blocking=`"),
    Symbol("F.scaled_dot_product_attention(q, k, v, attn_mask=, dropout_p=, is_causal=)", (2, 0),
           "GPU403 (not in the facts doc: from the 2.0 release, not read from a wheel)"),
    Symbol("F.scaled_dot_product_attention(..., scale=...)", (2, 1),
           "GPU403, a scale other than 1/sqrt(head dim) (not in the facts doc: from the 2.1 release)"),
    Symbol('torch.set_float32_matmul_precision("high")', (1, 12)),
    Symbol("torch.backends.cudnn.benchmark = True", (0, 4), "older than 0.4 too"),
    Symbol("torch.compile(model)", (2, 0)),
    Symbol("torch._foreach_mul_ / torch._foreach_add_(..., alpha=...)", (1, 13),
           "GPU507; torch.optim's multi-tensor SGD and Adam call them in 1.13 (not in the facts doc: from the "
           "1.13 source of torch/optim, not read from a wheel)"),
    Symbol("torch._foreach_lerp_", (2, 0),
           "GPU507; multi-tensor Adam moved to it in the 2.0 release (not in the facts doc: from the 2.0 "
           "release, not read from a wheel)"),
)}

# torch APIs a project's own code imports, and the release that added each. A module that imports one at
# module level, outside any `try` or `if`, cannot run on an older torch: a pin of the project that admits only
# older ones is stale (project/requirements.py `_stale`; config.py passes this table). Versions from the facts
# doc (torch.cuda.amp 1.6 and torch.autocast 1.10: GPU001's row and section 2; torch.amp.GradScaler 2.3 and
# torch.amp.custom_fwd 2.4: GPU002's and GPU003's rows) or, marked so, from the 2.0 release (torch.func,
# torch.compile and its torch._dynamo, F.scaled_dot_product_attention: pytorch.org/get-started/pytorch-2.0).
NEEDED_BY_IMPORT: dict[str, Version] = {
    "torch.cuda.amp": (1, 6),  # `from torch.cuda.amp import GradScaler, autocast`
    "torch.autocast": (1, 10),
    "torch.amp.autocast": (1, 12),  # the torch.amp package is new in 1.12 (torch.autocast is 1.10)
    "torch.amp.GradScaler": (2, 3),
    "torch.GradScaler": (2, 3),
    "torch.amp.custom_fwd": (2, 4),
    "torch.amp.custom_bwd": (2, 4),
    "torch.func": (2, 0),  # the 2.0 release
    "torch.compile": (2, 0),  # the 2.0 release
    "torch._dynamo": (2, 0),  # the 2.0 release
    "torch.nn.functional.scaled_dot_product_attention": (2, 0),  # the 2.0 release
}

# the newest torch that code showing `legacy_torch` evidence (project/facts.py: `loss.data[0]`, an IndexError since
# torch 1.0) runs on. Such a file is linted as if torch-version were this (or the declared floor, when older):
# every rule that withholds advice a floor lacks withholds what needs torch 1.0 or newer there, and what torch 0.4
# has (pinned memory, workers, non_blocking, cudnn.benchmark: the table above) is still advised
LEGACY_TORCH: Version = (0, 4)


class CodeFloor(tuple):
    """A floor the file's own code declares (LEGACY_TORCH), not a setting: messages say where it came from."""


_CODE_FLOOR: Version = CodeFloor(LEGACY_TORCH)

AUTOCAST = "torch.autocast(device_type=..., dtype=...)"
AMP_AUTOCAST = "torch.amp.autocast"
GRAD_SCALER = "torch.amp.GradScaler"
CUSTOM_FWD = "torch.amp.custom_fwd / custom_bwd(device_type=...)"
SHARDED_GRAD_SCALER = "ShardedGradScaler(device, ...)"
BF16_CHECK = "torch.cuda.is_bf16_supported(including_emulation=False)"
FUSED_CPU = "fused=True on CPU parameters"
USE_REENTRANT = "checkpoint(..., use_reentrant=False)"
PIN_MEMORY = "DataLoader(pin_memory=True)"
NUM_WORKERS = "DataLoader(num_workers=...)"
PERSISTENT_WORKERS = "DataLoader(persistent_workers=True)"
NON_BLOCKING = "Tensor.to(..., non_blocking=True) / .cuda(non_blocking=True)"
SDPA = "F.scaled_dot_product_attention(q, k, v, attn_mask=, dropout_p=, is_causal=)"
SDPA_SCALE = "F.scaled_dot_product_attention(..., scale=...)"
MATMUL_PRECISION = 'torch.set_float32_matmul_precision("high")'
CUDNN_BENCHMARK = "torch.backends.cudnn.benchmark = True"
COMPILE = "torch.compile(model)"
FOREACH_MUL_ADD = "torch._foreach_mul_ / torch._foreach_add_(..., alpha=...)"
FOREACH_LERP = "torch._foreach_lerp_"


@dataclass(frozen=True)
class LibrarySymbol:
    """What a fix writes into the API of a library other than torch, and the oldest release that takes it."""

    code: str  # as the docs print it
    library: str  # the distribution, as pip names it
    since: Version
    note: str = ""


# every symbol a gpulint fix may write into another library's API, and the release of that library that added
# it. No setting names those releases: the range comes from the project's pins (project/requirements.py
# `declared_range`, read for every library named here: config.py puts it in `Settings.libraries`)
LIBRARY_SYMBOLS: dict[str, LibrarySymbol] = {s.code: s for s in (
    LibrarySymbol("model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=...)", "transformers", (4, 35),
                  "GPU302; huggingface/transformers#27020, released in 4.35.0: older releases take no argument, "
                  "and pass no `use_reentrant` to torch"),
)}
HF_CHECKPOINTING_KWARGS = "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=...)"
# the Transformers release from which `gradient_checkpointing_enable()` without `gradient_checkpointing_kwargs`
# checkpoints with `use_reentrant=False` (5.0.0 `modeling_utils.py`: 4.35-4.57 pass `use_reentrant=True`)
HF_NON_REENTRANT_DEFAULT: Version = (5, 0)
# the torch release from which `checkpoint`/`checkpoint_sequential` without `use_reentrant` warns (2.1; 2.0 and
# older select the reentrant mode silently)
USE_REENTRANT_WARNING: Version = (2, 1)
# the distributions whose declared range is read for every file
LIBRARIES: tuple[str, ...] = tuple(sorted({s.library for s in LIBRARY_SYMBOLS.values()}))


def library_lacks(above: Optional[Version], code: str) -> bool:
    """No release of `code`'s library that the project admits has it: the range its pins declare ends (`above`,
    the first MAJOR.MINOR no longer admitted) at or before the release that added it. False when the range is
    open at the top or unknown."""
    return above is not None and above <= LIBRARY_SYMBOLS[code].since


def fused(optimizer: str) -> str:
    """The table's key for `fused=True` on a torch optimizer class (Adam, AdamW, SGD, Adagrad)."""
    return f"{optimizer}(fused=True)"


def legacy_floor(floor: Optional[Version]) -> Version:
    """The torch floor of a file whose code runs only on torch 0.4 or older: LEGACY_TORCH, or an older floor."""
    return _CODE_FLOOR if floor is None or floor > LEGACY_TORCH else floor


def since(code: str) -> Version:
    return SYMBOLS[code].since


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class TooNew:
    """The first symbol a fix would write that the project's torch floor lacks."""

    symbol: Symbol
    floor: Version

    def reason(self) -> str:
        """`torch.amp.GradScaler needs torch 2.3 (torch-version is 1.13)`."""
        where = "this file's code runs only on torch 0.4 or older: `loss.data[0]`" \
            if isinstance(self.floor, CodeFloor) else f"torch-version is {version_text(self.floor)}"
        return f"{self.symbol.code} needs torch {version_text(self.symbol.since)} ({where})"


def too_new(floor: Optional[Version], codes: Iterable[str]) -> Optional[TooNew]:
    """The newest of `codes` when the floor is below it; None when the floor allows them all or is unknown."""
    if floor is None:
        return None
    symbols = sorted((SYMBOLS[code] for code in codes), key=lambda s: s.since, reverse=True)
    if symbols and floor < symbols[0].since:
        return TooNew(symbols[0], floor)
    return None


@dataclass(frozen=True)
class AboveCeiling:
    """The first symbol a fix would write that no torch the code can run on has: the code, or a module it
    imports, relies on what a torch release (or the torchtext released with it) removed (`torch._six`, gone in
    2.0; `torchtext.legacy`, gone with 1.11; uint8 masks in `masked_fill`, an error from 2.1; indexing a 0-dim
    loss, `loss.data[0]`, an error from 1.0) or asserts an older
    torch (`assert torch.__version__.split('.')[0] == '1'`), or it is a helper that only modules doing so import
    (project/view.py `ceiling_importers`), and the symbol arrived in that release or later (project/facts.py
    `torch_ceiling`)."""

    symbol: Symbol
    ceiling: Version

    def reason(self) -> str:
        """`torch.amp.GradScaler needs torch 2.3; the code runs only on torch older than 2.0 (...)`."""
        return f"{self.symbol.code} needs torch {version_text(self.symbol.since)}; the code runs only on torch " \
               f"older than {version_text(self.ceiling)} (it, or a module it imports or that imports it, relies " \
               f"on what that release removed, or asserts an older torch)"


def above_ceiling(ceiling: Optional[Version], codes: Iterable[str]) -> Optional[AboveCeiling]:
    """The newest of `codes` when it is at or past the ceiling; None when the ceiling is unknown or allows all."""
    if ceiling is None:
        return None
    symbols = sorted((SYMBOLS[code] for code in codes), key=lambda s: s.since, reverse=True)
    if symbols and symbols[0].since >= ceiling:
        return AboveCeiling(symbols[0], ceiling)
    return None


Unavailable = Union[TooNew, AboveCeiling]


def unavailable(floor: Optional[Version], ceiling: Optional[Version], codes: Iterable[str]) -> Optional[Unavailable]:
    """Why a fix cannot write `codes`: the project supports a torch older than one of them (its floor), or its
    code runs only on one (its ceiling); None when both allow them all or are unknown."""
    codes = list(codes)
    return too_new(floor, codes) or above_ceiling(ceiling, codes)


def table_markdown() -> str:
    """The table as docs/fix-safety.md prints it."""
    lines = ["| symbol a fix writes | oldest torch | note |", "|---|---|---|"]
    for symbol in sorted(SYMBOLS.values(), key=lambda s: (s.since, s.code)):
        lines.append(f"| `{symbol.code}` | {version_text(symbol.since)} | {symbol.note} |")
    return "\n".join(lines) + "\n"


def library_table_markdown() -> str:
    """The table of other libraries' symbols (LIBRARY_SYMBOLS), as docs/fix-safety.md prints it."""
    lines = ["| symbol a fix writes | oldest release | note |", "|---|---|---|"]
    for symbol in sorted(LIBRARY_SYMBOLS.values(), key=lambda s: (s.library, s.since, s.code)):
        lines.append(f"| `{symbol.code}` | {symbol.library} {version_text(symbol.since)} | {symbol.note} |")
    return "\n".join(lines) + "\n"
