"""What `gpulint verify` checks for a rule's rewrite: how far the loss may drift, and what must run.

A rule declares one `Verification` (`Rule.verification`). `tolerance` says how far the
rewritten loss may drift from the original (measured on CPU runs of an MLP and a CNN over 50
steps and 3-5 seeds: numerics-neutral rewrites reproduce the loss bit for bit with
deterministic settings, fused optimizers differ in the last bits, mixed precision deviated at
most 0.7 % per step). `constructs` are the harness events that show the rewrite ran (an
optimizer stepping, a DataLoader yielding a batch, an autocast region entered, a
checkpointed forward); `expected` tells the rewritten construct from the others of its kind.
`changes` names what a rule's rewrite may change on purpose, so that verify can say so instead
of reporting it as damage: the random numbers a dataset draws, or which parameters train.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from gpulint.records import dataclass

Details = dict[str, Any]


@dataclass(frozen=True)
class Tolerance:
    name: str
    per_step: float  # relative deviation allowed at every compared step
    mean_last: Optional[float] = None  # relative deviation allowed for the mean of the last `last_n` losses
    last_n: int = 10
    grace_steps: int = 0  # steps left out of the per-step check when a GradScaler skipped a step
    rank: int = 0  # larger is looser; a combination of fixes takes the loosest it needs
    bit_exact: bool = False  # the rewrite must reproduce the loss exactly; the noise floor is shown, never added
    # the noise floor's nudge is one ulp of this many mantissa bits (None: float32); a mixed-precision rewrite's
    # is that of the 16-bit type its autocast regions ran in (7: bfloat16, 10: float16), set from the run
    noise_bits: Optional[int] = None

    def describe(self) -> str:
        text = f"{self.name}: {self.per_step:g} relative per step"
        if self.mean_last is not None:
            text += f", mean of the last {self.last_n} within {self.mean_last:.0%}"
        return text + (" (bit-exact)" if self.bit_exact else " plus the measured noise floor")

    @property
    def noise_precision(self) -> str:
        return {None: "float32", 10: "float16", 7: "bfloat16"}.get(self.noise_bits, f"{self.noise_bits}-bit mantissa")


NEUTRAL = Tolerance("numerics-neutral", 1e-6, rank=0, bit_exact=True)
FUSED_OPTIMIZER = Tolerance("fused optimizer", 1e-4, rank=1)
# a fused kernel for the same math (GPU403's scaled_dot_product_attention): float32 losses within 1.1e-07
# relative over 12 steps on CPU (tests/verify/scripts/manual_attention_lm.py), last-bit rounding like a fused
# optimizer's
FUSED_KERNEL = Tolerance("fused kernel", 1e-4, rank=1)
# a GradScaler switched off under bfloat16: scaling by a power of two is exact unless a bfloat16 gradient
# is subnormal unscaled, so the losses agree up to the last bits of bfloat16 (GPU004)
UNSCALED_BFLOAT16 = Tolerance("bfloat16 without loss scaling", 1e-4, rank=1, noise_bits=7)
# float32 matmuls with TF32 inputs (10-bit mantissa, float16's): on a CPU the setting changes nothing, on an
# Ampere GPU the losses drift like float16 autocast's at most (GPU401)
TF32_MATMULS = Tolerance("TF32 matmuls", 2e-2, mean_last=1e-2, rank=2, noise_bits=10)
MIXED_PRECISION = Tolerance("mixed precision", 2e-2, mean_last=1e-2, grace_steps=5, rank=2, noise_bits=10)

# what a rewrite may change on purpose (Verification.changes)
RANDOM_STREAMS = "random streams"  # e.g. DataLoader workers draw from their own seeds
TRAINED_PARAMETERS = "trained parameters"  # e.g. non-reentrant checkpointing gives checkpointed blocks gradients


def any_construct(kind: str, details: Details) -> bool:
    return True


def construct_enabled(kind: str, details: Details) -> bool:
    """An autocast region or GradScaler that is not switched off (`enabled=False`)."""
    return details.get("enabled", True) is not False


@dataclass(frozen=True)
class Verification:
    tolerance: Tolerance
    constructs: tuple[str, ...]  # harness construct kinds; empty: the fix has no runtime effect
    evidence: str  # what must happen inside the timed steps, in words
    expected: Callable[[str, Details], bool] = any_construct
    mixed_precision: bool = False  # numerics in 16 bits: on an emulating CPU, checked but not timed
    mismatch_hint: str = ""  # what a loss mismatch may mean when this rule's tolerance was the one applied
    changes: tuple[str, ...] = ()  # RANDOM_STREAMS, TRAINED_PARAMETERS: changed on purpose, named in the report
