"""What makes two saved tensors the same memory, for the harness's count of activation bytes.

Imported only by the harness, inside the run's subprocess, after torch (verify/harness.py).
"""

from __future__ import annotations

import torch


def storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    """What makes two saved tensors "the same memory": device and storage address (views share it)."""
    storage = tensor.untyped_storage()
    return str(tensor.device), storage.data_ptr()
