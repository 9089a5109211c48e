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
Those steps get bfloat16 (amp-dtype "auto") or no fix (amp-dtype "float16").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from gpulint.analysis.training import TrainingFacts
from gpulint.core.walk import walk

FLOAT16_TINY = 6e-8  # below float16's smallest subnormal (5.96e-8): the constant becomes 0
FLOAT16_MAX = 65504.0  # float16's largest finite value


@dataclass(frozen=True)
class Hazard:
    """A constant float16 cannot hold, in the code the autocast region runs."""

    code: str  # the literal as written: `1e-15`
    why: str  # "flushes to zero" / "overflows"

    def text(self) -> str:
        return f"{self.code} {self.why} in float16"


class _Constants(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[Hazard] = []
        self.names: list[str] = []

    def visit_Float(self, node: cst.Float) -> None:
        try:
            value = abs(float(node.value.replace("_", "")))
        except ValueError:
            return
        if 0.0 < value < FLOAT16_TINY:
            self.found.append(Hazard(node.value, "flushes to zero"))
        elif value > FLOAT16_MAX and value != float("inf"):
            self.found.append(Hazard(node.value, "overflows"))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name):
            self.names.append(node.func.value)


def float16_hazard(facts: TrainingFacts, statements: list[cst.CSTNode]) -> Optional[Hazard]:
    """The first constant float16 cannot hold in the region's statements, in the functions of this
    file they call by name, or in a `forward` method of a class of this file (the model may be one)."""
    ctx = facts.ctx
    seen = _Constants()
    for statement in statements:
        walk(statement, seen)
    if seen.found:
        return seen.found[0]
    functions = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    called = [functions[name] for name in dict.fromkeys(seen.names) if name in functions]
    forwards = [item for cls in ctx.module.body if isinstance(cls, cst.ClassDef)
                for item in cls.body.body if isinstance(item, cst.FunctionDef) and item.name.value == "forward"]
    for function in [*called, *forwards]:
        inner = _Constants()
        walk(function.body, inner)
        if inner.found:
            return inner.found[0]
    return None


def choice_code(torch: str, device: str, quote: str, cuda: bool) -> str:
    """The right-hand side that picks the autocast dtype at run time (amp-dtype "auto"); `cuda`: the
    device is CUDA whatever happens at run time."""
    native = f"{torch}.cuda.is_bf16_supported(including_emulation=False)"
    if cuda:
        return f"{torch}.bfloat16 if {native} else {torch}.float16"
    # the device type is chosen at run time: float16 only on a CUDA GPU without native bfloat16
    return f"{torch}.float16 if {device} == {quote}cuda{quote} and not {native} else {torch}.bfloat16"
