"""Make a CUDA-targeted script run on the CPU, and say what was changed.

Imported only by the harness subprocess (it imports torch). Every adaptation is counted the
first time it happens, so the report lists what the run actually needed, not what was armed.
The mapping covers what real training scripts call: devices ("cuda", "cuda:1", an index in
`.to(0)`), `.cuda()`, `Tensor.pin_memory()`, autocast and GradScaler, the `torch.cuda` calls
for seeding, memory statistics, device queries, streams, events, NVTX ranges and RNG state,
`torch.load` of CUDA checkpoints, and DDP's "nccl" backend and `device_ids`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import types
from typing import Any, Callable

import torch

_FACTORIES = (
    "zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "randperm", "tensor",
    "as_tensor", "eye", "linspace", "logspace", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "empty_strided", "normal", "scalar_tensor",
)
_NOOP_CUDA = ("synchronize", "set_device", "reset_peak_memory_stats", "reset_max_memory_allocated",
              "reset_accumulated_memory_stats", "empty_cache", "ipc_collect", "set_per_process_memory_fraction")
_ZERO_CUDA = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")


def is_cuda(value: Any) -> bool:
    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    return isinstance(value, torch.device) and value.type == "cuda"


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _available_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


class _CpuEvent:
    """torch.cuda.Event on the CPU: records wall time, so `start.elapsed_time(end)` still reads milliseconds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.time: float = 0.0

    def record(self, stream: Any = None) -> None:
        self.time = time.perf_counter()

    def elapsed_time(self, end: "_CpuEvent") -> float:
        return (end.time - self.time) * 1000.0

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True


class _CpuStream:
    """torch.cuda.Stream on the CPU: work is synchronous, so every method is a no-op."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> _CpuEvent:
        event = event or _CpuEvent()
        event.record()
        return event

    def query(self) -> bool:
        return True

    def __enter__(self) -> "_CpuStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class CpuAdapter:
    """Patches torch so that device "cuda" means the CPU and CUDA autocast means CPU autocast (float16 as
    float16, or as bfloat16 when asked: bfloat16 emulation)."""

    def __init__(self, hide_cuda: bool, bf16_native: bool = True, float16: str = "bfloat16") -> None:
        self.hide_cuda = hide_cuda
        self.bf16_native = bf16_native
        self.float16 = float16  # "native": CPU float16 autocast; "bfloat16": float16 regions run in bfloat16
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
            torch.cuda.is_available = is_available
        self._patch_tensor_moves()
        self._patch_factories()
        if self.hide_cuda or not cuda_present:
            self._patch_cuda_calls()
        self._patch_autocast()
        self._patch_grad_scaler()
        self._patch_load()
        self._patch_distributed()

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
            args, kwargs = adapter._map_to_args(args, kwargs)
            return original_to(tensor, *args, **kwargs)

        original_module_to = torch.nn.Module.to

        @functools.wraps(original_module_to)
        def module_to(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = adapter._map_to_args(args, kwargs)
            return original_module_to(module, *args, **kwargs)

        def tensor_cuda(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            adapter.note(".cuda() kept the tensor on the CPU")
            return tensor

        def module_cuda(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            adapter.note("Module.cuda() kept the module on the CPU")
            return module

        def pin_memory(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            adapter.note("Tensor.pin_memory() left the tensor unpinned (no CUDA)")
            return tensor

        def record_stream(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            adapter.note("Tensor.record_stream() skipped")

        torch.Tensor.to = to  # type: ignore[assignment, method-assign]
        torch.nn.Module.to = module_to  # type: ignore[assignment, method-assign]
        torch.Tensor.cuda = tensor_cuda  # type: ignore[assignment, method-assign]
        torch.nn.Module.cuda = module_cuda  # type: ignore[assignment, method-assign]
        torch.Tensor.pin_memory = pin_memory  # type: ignore[assignment, method-assign]
        torch.Tensor.record_stream = record_stream  # type: ignore[assignment, method-assign]

        original_default = torch.set_default_device

        @functools.wraps(original_default)
        def set_default_device(device: Any) -> None:
            original_default(adapter._device(device))

        torch.set_default_device = set_default_device

    def _map_device_arg(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            self.note("device index (cuda:N) mapped to the CPU")
            return torch.device("cpu")
        return self._device(value)

    def _map_to_args(self, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        """`.to("cuda")`, `.to(0)`, `.to(device=...)`: the first positional argument or `device`."""
        if args:
            args = (self._map_device_arg(args[0]), *args[1:])
        if "device" in kwargs:
            kwargs["device"] = self._map_device_arg(kwargs["device"])
        return args, kwargs

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
        cuda = torch.cuda
        for name in _NOOP_CUDA:
            setattr(cuda, name, self._const(f"torch.cuda.{name}() skipped", None))
        for name in _ZERO_CUDA:
            setattr(cuda, name, self._const(f"torch.cuda.{name}() answered 0 (no CUDA)", 0))
        cuda.current_device = self._const("torch.cuda.current_device() answered 0", 0)
        cuda.get_device_name = self._const("torch.cuda.get_device_name() answered 'cpu'", "cpu")
        cuda.get_device_capability = self._const("torch.cuda.get_device_capability() answered (0, 0)", (0, 0))
        properties = types.SimpleNamespace(name="cpu", total_memory=_total_memory(), major=0, minor=0,
                                           multi_processor_count=os.cpu_count() or 1, is_integrated=False)
        cuda.get_device_properties = self._const("torch.cuda.get_device_properties() described the CPU", properties)
        cuda.mem_get_info = self._call("torch.cuda.mem_get_info() answered the host's memory",
                                       lambda *a, **k: (_available_memory(), _total_memory()))
        cuda.is_bf16_supported = self._const(
            "torch.cuda.is_bf16_supported() answered " + str(self.bf16_native) + " (the CPU's bfloat16 support)",
            self.bf16_native)
        cuda.get_rng_state = self._call("torch.cuda.get_rng_state() returned an empty state",
                                        lambda *a, **k: torch.empty(0, dtype=torch.uint8))
        cuda.get_rng_state_all = self._call("torch.cuda.get_rng_state_all() returned an empty state",
                                            lambda *a, **k: [])
        cuda.set_rng_state = self._const("torch.cuda.set_rng_state() skipped", None)
        cuda.set_rng_state_all = self._const("torch.cuda.set_rng_state_all() skipped", None)
        cuda.Event = self._class("torch.cuda.Event timed on the CPU clock", _CpuEvent)  # type: ignore[assignment, misc]
        cuda.Stream = self._class("torch.cuda.Stream ran synchronously", _CpuStream)  # type: ignore[assignment, misc]
        stream = _CpuStream()
        cuda.current_stream = self._const("torch.cuda.current_stream() ran synchronously", stream)
        cuda.default_stream = self._const("torch.cuda.default_stream() ran synchronously", stream)
        cuda.stream = self._call("torch.cuda.stream() ran synchronously", lambda *a, **k: contextlib.nullcontext())
        cuda.device = self._call("torch.cuda.device() context skipped", lambda *a, **k: contextlib.nullcontext())  # type: ignore[assignment, misc]
        nvtx = getattr(cuda, "nvtx", None)
        if nvtx is not None:
            nvtx.range_push = self._const("torch.cuda.nvtx ranges skipped", 0)
            nvtx.range_pop = self._const("torch.cuda.nvtx ranges skipped", 0)
            nvtx.mark = self._const("torch.cuda.nvtx ranges skipped", None)
            nvtx.range = self._call("torch.cuda.nvtx ranges skipped", lambda *a, **k: contextlib.nullcontext())

    def _const(self, what: str, value: Any) -> Callable[..., Any]:
        def const(*args: Any, **kwargs: Any) -> Any:
            self.note(what)
            return value
        return const

    def _call(self, what: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.note(what)
            return func(*args, **kwargs)
        return call

    def _class(self, what: str, cls: type) -> type:
        adapter = self

        class Mapped(cls):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                adapter.note(what)
                super().__init__(*args, **kwargs)

        Mapped.__name__ = cls.__name__
        return Mapped

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
            requested = dtype
            if device_type == "cpu" and dtype in (torch.float16, torch.half) and enabled:
                if adapter.float16 == "bfloat16":
                    dtype = torch.bfloat16
                    adapter.note("autocast float16 ran as CPU bfloat16 (bfloat16 emulation)")
                else:
                    adapter.note("autocast float16 ran as CPU float16")
            original_init(ctx, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
            ctx._gpulint_requested = requested if requested is not None else ctx.fast_dtype

        autocast.__init__ = __init__  # type: ignore[assignment, method-assign]

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

        scaler.__init__ = __init__  # type: ignore[assignment, method-assign]

    def _patch_load(self) -> None:
        original_load = torch.load
        adapter = self

        @functools.wraps(original_load)
        def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
            if map_location is None or is_cuda(map_location):
                adapter.note("torch.load() mapped the checkpoint's tensors to the CPU")
                map_location = "cpu"
            return original_load(f, map_location, *args, **kwargs)

        torch.load = load

    def _patch_distributed(self) -> None:
        """DDP scripts name "nccl" and pass device_ids; on the CPU, gloo and no device_ids do the same job."""
        try:
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel
        except ImportError:
            return
        if not dist.is_available():
            return
        adapter = self
        original_init_pg = dist.init_process_group

        @functools.wraps(original_init_pg)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            backend = kwargs.get("backend", args[0] if args else None)
            if isinstance(backend, str) and "nccl" in backend:
                adapter.note("init_process_group('nccl') ran with gloo")
                if "backend" in kwargs:
                    kwargs["backend"] = "gloo"
                else:
                    args = ("gloo", *args[1:])
            return original_init_pg(*args, **kwargs)

        dist.init_process_group = init_process_group

        original_ddp = DistributedDataParallel.__init__

        @functools.wraps(original_ddp)
        def ddp_init(module_self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
            on_cpu = all(p.device.type == "cpu" for p in module.parameters())
            if on_cpu:
                if args:  # device_ids, output_device are the first positional parameters
                    args = (None, None, *args[2:]) if len(args) >= 2 else (None,)
                    adapter.note("DistributedDataParallel device_ids dropped for a CPU module")
                for key in ("device_ids", "output_device"):
                    if kwargs.get(key) is not None:
                        kwargs[key] = None
                        adapter.note("DistributedDataParallel device_ids dropped for a CPU module")
            original_ddp(module_self, module, *args, **kwargs)

        DistributedDataParallel.__init__ = ddp_init  # type: ignore[assignment, method-assign]
