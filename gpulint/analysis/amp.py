"""Qualified names of the mixed-precision API, old and new, shared by several rules."""

from __future__ import annotations

from enum import Enum
from typing import Optional

from gpulint.core import floors
from gpulint.records import dataclass

AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
AUTOCAST_DEPRECATED = frozenset({
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast",
})
GRAD_SCALER = frozenset({"torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
GRAD_SCALER_DEPRECATED = frozenset({
    "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
})
SHARDED_GRAD_SCALER = frozenset({"torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler"})
ANY_GRAD_SCALER = GRAD_SCALER | GRAD_SCALER_DEPRECATED | SHARDED_GRAD_SCALER


FLOAT16 = frozenset({"torch.float16", "torch.half"})
BFLOAT16 = frozenset({"torch.bfloat16"})
ANY_AUTOCAST = AUTOCAST | AUTOCAST_DEPRECATED


class Coverage(Enum):
    """Whether a statement runs under autocast, as far as the file shows (analysis/training.py on LibCST,
    analysis/amp_steps.py on `ast`)."""

    COVERED = "covered"  # provably inside autocast
    NOT_COVERED = "not covered"  # provably outside: the file uses no autocast at all
    UNKNOWN = "unknown"  # not lexically covered, but the file uses autocast somewhere


@dataclass(frozen=True)
class Replacement:
    """Where a deprecated `torch.cuda.amp` / `torch.cpu.amp` object lives now."""

    module: str
    name: str
    device: str  # the device type the old object implied
    symbol: str  # the replacement's entry in the table of what each fix symbol needs (core/floors.py)

    @property
    def since(self) -> tuple[int, int]:
        """The oldest torch with the replacement."""
        return floors.since(self.symbol)


# deprecated qualified name -> its torch.amp replacement
DEPRECATED_AMP: dict[str, Replacement] = {}
for _device in ("cuda", "cpu"):
    for _where in ("", ".autocast_mode"):
        DEPRECATED_AMP[f"torch.{_device}.amp{_where}.autocast"] = Replacement(
            "torch.amp", "autocast", _device, floors.AMP_AUTOCAST)
    for _where in ("", ".grad_scaler"):
        DEPRECATED_AMP[f"torch.{_device}.amp{_where}.GradScaler"] = Replacement(
            "torch.amp", "GradScaler", _device, floors.GRAD_SCALER)
for _name in ("custom_fwd", "custom_bwd"):
    for _where in ("", ".autocast_mode"):
        DEPRECATED_AMP[f"torch.cuda.amp{_where}.{_name}"] = Replacement("torch.amp", _name, "cuda", floors.CUSTOM_FWD)
# the rename of torch.cuda.amp.autocast / torch.cpu.amp.autocast where the project's torch floor predates the
# torch.amp package (1.12): `torch.autocast(device_type, ...)`, in torch since 1.10 (facts doc, section 2: the
# deprecated classes are thin subclasses of it there too, forwarding `enabled`, `dtype` and `cache_enabled`)
TORCH_AUTOCAST: dict[str, Replacement] = {
    device: Replacement("torch", "autocast", device, floors.AUTOCAST) for device in ("cuda", "cpu")}
DEPRECATED_AMP_MODULES = frozenset(qualified.rsplit(".", 1)[0] for qualified in DEPRECATED_AMP)
# torch.cuda.amp.autocast(enabled, dtype, cache_enabled): the old positional order
OLD_AUTOCAST_ORDER = ("enabled", "dtype", "cache_enabled")



def replacement_for(target: str, floor: Optional[floors.Version]) -> Optional[Replacement]:
    """What replaces the deprecated `target` on every torch from `floor` on: its torch.amp object, or, for an
    autocast where the floor is 1.10 or 1.11 (torch.autocast, but no torch.amp package), `torch.autocast`. None
    when `target` is not deprecated."""
    found = DEPRECATED_AMP.get(target)
    if found is not None and found.name == "autocast" and floor is not None and floor < found.since:
        return TORCH_AUTOCAST[found.device]
    return found
