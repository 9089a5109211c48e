"""Make a CUDA-targeted script run on the CPU, and say what was changed.

Imported only by the harness subprocess (it imports torch). Every adaptation is counted the
first time it happens, so the report lists what the run actually needed, not what was armed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

_FACTORIES = (
    "zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "randperm", "tensor",
    "as_tensor", "eye", "linspace", "logspace", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "empty_strided", "normal", "scalar_tensor",
)
_NOOP_CUDA = ("synchronize", "set_device", "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache")


def is_cuda(value: Any) -> bool:
    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    return isinstance(value, torch.device) and value.type == "cuda"


class CpuAdapter:
    """Patches torch so that device "cuda" means the CPU and CUDA autocast means CPU bfloat16."""

    def __init__(self, hide_cuda: bool) -> None:
        self.hide_cuda = hide_cuda
        self.notes: dict[str, int] = {}

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1

    def summary(self) -> list[str]:
        return [f"{what} ({count}x)" if count > 1 else what for what, count in self.notes.items()]

    def install(self) -> None:
        cuda_present = torch.cuda.is_available()
        if self.hide_cuda and cuda_present:
            def is_available() -> bool:
                self.note("torch.cuda.is_available() answered False")
                return False
            torch.cuda.is_available = is_available  # type: ignore[assignment]
        self._patch_tensor_moves()
        self._patch_factories()
        if self.hide_cuda or not cuda_present:
            self._patch_cuda_calls()
        self._patch_autocast()
        self._patch_grad_scaler()

    def _device(self, value: Any) -> Any:
        if is_cuda(value):
            self.note("device 'cuda' mapped to the CPU")
            return torch.device("cpu")
        return value

    def _patch_tensor_moves(self) -> None:
        original_to = torch.Tensor.to
        adapter = self

        @functools.wraps(original_to)
        def to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if args:
                args = tuple(adapter._device(a) for a in args)
            if "device" in kwargs:
                kwargs["device"] = adapter._device(kwargs["device"])
            return original_to(tensor, *args, **kwargs)

        def tensor_cuda(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            adapter.note(".cuda() kept the tensor on the CPU")
            return tensor

        def module_cuda(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            adapter.note("Module.cuda() kept the module on the CPU")
            return module

        torch.Tensor.to = to  # type: ignore[method-assign]
        torch.Tensor.cuda = tensor_cuda  # type: ignore[method-assign]
        torch.nn.Module.cuda = module_cuda  # type: ignore[method-assign]

    def _wrap_factory(self, func: Callable[..., Any]) -> Callable[..., Any]:
        adapter = self

        @functools.wraps(func)
        def factory(*args: Any, **kwargs: Any) -> Any:
            if "device" in kwargs:
                kwargs["device"] = adapter._device(kwargs["device"])
            return func(*args, **kwargs)

        return factory

    def _patch_factories(self) -> None:
        for name in _FACTORIES:
            func = getattr(torch, name, None)
            if func is not None:
                setattr(torch, name, self._wrap_factory(func))

    def _patch_cuda_calls(self) -> None:
        for name in _NOOP_CUDA:
            if hasattr(torch.cuda, name):
                setattr(torch.cuda, name, self._noop(f"torch.cuda.{name}() skipped"))

    def _noop(self, what: str) -> Callable[..., None]:
        def noop(*args: Any, **kwargs: Any) -> None:
            self.note(what)
        return noop

    def _patch_autocast(self) -> None:
        autocast = torch.amp.autocast_mode.autocast
        original_init = autocast.__init__
        adapter = self

        @functools.wraps(original_init)
        def __init__(ctx: Any, device_type: str, dtype: Any = None, enabled: bool = True,
                     cache_enabled: Any = None) -> None:
            if device_type == "cuda":
                requested = dtype if dtype is not None else torch.float16  # CUDA autocast's default
                device_type, dtype = "cpu", requested
                adapter.note("autocast('cuda') ran as CPU autocast")
            if device_type == "cpu" and dtype in (torch.float16, torch.half):
                dtype = torch.bfloat16
                adapter.note("autocast float16 ran as CPU bfloat16")
            original_init(ctx, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        autocast.__init__ = __init__  # type: ignore[method-assign]

    def _patch_grad_scaler(self) -> None:
        scaler = torch.amp.grad_scaler.GradScaler
        original_init = scaler.__init__
        adapter = self

        @functools.wraps(original_init)
        def __init__(obj: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            if device == "cuda":
                device = "cpu"
                adapter.note("GradScaler('cuda') ran as a working CPU GradScaler")
            original_init(obj, device, *args, **kwargs)

        scaler.__init__ = __init__  # type: ignore[method-assign]
