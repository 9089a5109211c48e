"""Exact activation memory for the runtime tests: bytes autograd keeps for backward, counted while a
forward runs (the same count the verify harness makes, verify/harness.py, by storage).

Process RSS and allocator statistics are too noisy on CPU (caching, page faults) to compare
two versions of a model, and `max_memory_allocated` reads 0 without a GPU. Counting the
storages that autograd packs through `saved_tensors_hooks` is exact and device independent,
and it is precisely what activation checkpointing removes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

from gpulint.verify.memory import storage_key


@dataclass(frozen=True)
class SavedTensors:
    """What one forward left for backward: unique storages, and their total size in bytes."""

    bytes: int
    storages: int
    result: Any  # whatever the measured callable returned (the loss, to call backward on)


def saved_tensor_bytes(forward: Callable[[], Any], exclude: Iterable[torch.Tensor] = ()) -> SavedTensors:
    """Run `forward()` and sum the bytes of the unique storages autograd saves for backward.

    Tensors sharing a storage (views, a weight and its transpose) count once. Storages of
    `exclude` (pass `model.parameters()` to count activations only) are not counted. The
    storages are kept alive until `forward` returns, so a freed address that is reused
    during the forward cannot hide a second storage.
    """
    excluded = set()
    for tensor in exclude:
        excluded.add(storage_key(tensor))
    seen: dict[tuple[str, int], torch.UntypedStorage] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        try:
            key = storage_key(tensor)
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested or other storage-less tensors
            return tensor
        if key not in excluded and key not in seen and storage.data_ptr() != 0:
            seen[key] = storage
        return tensor

    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        result = forward()
    total = sum(storage.nbytes() for storage in seen.values())
    return SavedTensors(bytes=total, storages=len(seen), result=result)
