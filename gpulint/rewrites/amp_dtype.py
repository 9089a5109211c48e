"""Which dtype the mixed-precision fix writes, and what float16 cannot hold.

`amp-dtype = "auto"` (the default, decisions.md) writes the choice once, decided at run time:
bfloat16 where the GPU computes in it natively (Ampere and newer), float16 with a GradScaler
enabled only on that path elsewhere (T4, V100). `torch.cuda.is_bf16_supported()` alone says True
on a T4 or V100 from torch 2.3, because bfloat16 can be emulated there (slowly), so the choice
asks with `including_emulation=False`. Where the device type is chosen at run time, a run on the
CPU, an Intel GPU or a Mac takes bfloat16 too, which their autocast supports and which needs no
scaler.

float16 holds magnitudes from about 6e-8 (smaller ones flush to zero) to 65504 (larger ones
overflow). A forward pass or loss that adds `1e-15` to probabilities before a log, or fills a
mask with `-1e9`, breaks under float16 autocast: `log(0)` is `-inf`, and `masked_fill` raises.
Those steps get bfloat16 (amp-dtype "auto") or no fix (amp-dtype "float16"): analysis/amp_fix.py
finds such constants (on `ast`, for `check` and the fix alike); this module writes the choice.
"""

from __future__ import annotations


def choice_code(torch: str, device: str, quote: str, cuda: bool) -> str:
    """The right-hand side that picks the autocast dtype at run time (amp-dtype "auto"); `cuda`: the
    device is CUDA whatever happens at run time."""
    native = f"{torch}.cuda.is_bf16_supported(including_emulation=False)"
    if cuda:
        return f"{torch}.bfloat16 if {native} else {torch}.float16"
    # the device type is chosen at run time: float16 only on a CUDA GPU without native bfloat16
    return f"{torch}.float16 if {device} == {quote}cuda{quote} and not {native} else {torch}.bfloat16"
