"""Instruments of a checked run that judge numerics rather than count steps; inside the harness process only.

- `nudge`: moves each initial parameter element by one unit in the last place, in a direction
  drawn from the run's own generator (never the script's), for the noise-floor runs;
- `ExceptionCounter`: every exception the user's code handles once training began, also the
  ones it swallows (`except: pass` hides a broken step from the loss);
- `RangeProbe`: the largest magnitude of every 16-bit tensor produced inside an autocast region,
  and the epsilons added there, against float16's range (what a GPU's float16 would overflow or
  lose when this CPU ran the region in bfloat16);
- `GlobalRngProbe`: whether a DataLoader's fetch draws from the process-wide random generators
  (then worker processes draw different numbers than the training process did).

torch is passed in (the harness imports it); nothing here runs in gpulint's own process.
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any, Callable, Optional

FLOAT16_MAX = 65504.0
FLOAT16_TINY = 2.0 ** -24  # the smallest float16 subnormal: a smaller addend rounds away
MAX_LISTED = 5  # findings of each kind kept (the worst or the first)
MIN_EVERY = 5  # the smallest non-zero magnitude is read on steps 1, 6, 11, ... (the largest on every step)
# results that hold the values of their input (views, copies, shape queries): nothing new to read
SAME_VALUES = frozenset({"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute", "t",
                         "expand", "expand_as", "contiguous", "detach", "clone", "__getitem__", "narrow", "select",
                         "split", "chunk", "unbind", "movedim", "view_as", "reshape_as", "flip", "roll", "cat",
                         "stack", "__get__", "size", "dim", "numel", "data_ptr", "stride"})
IGNORED_EXCEPTIONS = (StopIteration, StopAsyncIteration, GeneratorExit)
ARITHMETIC = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__", "sub", "sub_", "__sub__", "__rsub__",
                        "__isub__", "div", "div_", "__truediv__", "__rtruediv__", "__itruediv__", "clamp",
                        "clamp_", "clamp_min", "clamp_min_", "maximum"})


def nudge(torch: Any, params: Any, seed: int, first_index: int, bits: Optional[int] = None) -> int:
    """Move every finite non-zero element of each floating parameter one ulp up or down; returns how many
    tensors changed. The ulp is the parameter's own (`bits` None) or that of a float with `bits` mantissa
    bits (10: float16, 7: bfloat16), the precision a mixed-precision rewrite computes in. Directions come
    from a generator of the run's own, never the script's; zeros (a bias initialised to 0) stay zero."""
    views = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
             torch.bfloat16: torch.int16}
    own_bits = {torch.float32: 23, torch.float64: 52, torch.float16: 10, torch.bfloat16: 7}
    changed = 0
    for offset, param in enumerate(params):
        if not isinstance(param, torch.Tensor) or param.dtype not in views or param.numel() == 0:
            continue
        generator = torch.Generator(device="cpu").manual_seed(seed * 1_000_003 + first_index + offset)
        with torch.no_grad():
            data = param.detach()
            signs = torch.randint(0, 2, data.shape, generator=generator).to(data.device) * 2 - 1
            ok = torch.isfinite(data) & (data != 0) & (data.abs() < torch.finfo(data.dtype).max / 2)
            if bits is None or bits >= own_bits[data.dtype]:
                bits_view = data.view(views[data.dtype])  # IEEE bit patterns are ordered by magnitude: +-1 is one ulp
                bits_view.add_(torch.where(ok, signs.to(bits_view.dtype), torch.zeros_like(bits_view)))
            else:
                wide = data.double()
                _, exponent = torch.frexp(wide)  # wide = m * 2**exponent, 0.5 <= |m| < 1
                ulp = torch.ldexp(torch.ones_like(wide), exponent - 1 - bits)
                data.copy_(torch.where(ok, wide + signs.double() * ulp, wide).to(data.dtype))
        changed += 1
    return changed


class ExceptionCounter:
    """Counts the exceptions the user's code handles inside the steps, from `start()` on.

    A trace function is set for the user's frames only, so library code runs untraced; frames
    already running when training starts (the loop's own) are traced too. An exception counts
    when an `except` (or `finally`) clause of a user frame runs while it is being handled: one
    that only passes through the user's code on its way to a library's own handler (torch's
    checkpoint stops a recomputation that way) does not, nor does one that ends the run (the
    run's crash says that).
    """

    def __init__(self, is_user: Callable[[str], Optional[str]], on_exception: Callable[..., None]) -> None:
        self.is_user = is_user
        self.on_exception = on_exception
        self.user_code: dict[Any, bool] = {}
        self.pending: dict[Any, tuple[type, BaseException, Any, int]] = {}  # frame -> the exception arriving there
        self.counted: list[BaseException] = []  # this step's, so that one exception counts once
        self.started = False

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        frame = sys._getframe(1)
        while frame is not None:
            if self._user(frame.f_code):
                frame.f_trace = self._local
                frame.f_trace_lines = False
            frame = frame.f_back  # type: ignore[assignment]
        sys.settrace(self._global)

    def stop(self) -> None:
        if self.started:
            sys.settrace(None)
            self.pending.clear()
            self.counted.clear()

    def forget(self) -> None:
        """At a step boundary: the exceptions kept to count each one once may go."""
        self.counted.clear()

    def _user(self, code: Any) -> bool:
        known = self.user_code.get(code)
        if known is None:
            known = self.user_code[code] = self.is_user(code.co_filename) is not None
        return known

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        if not self._user(frame.f_code):
            return None
        frame.f_trace_lines = False
        return self._local

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "exception":
            kind, exc, tb = arg
            if not issubclass(kind, IGNORED_EXCEPTIONS):
                self.pending[frame] = (kind, exc, tb, frame.f_lineno)
                frame.f_trace_lines = True  # the next event here tells whether a handler of this frame runs
        elif event == "line":
            found = self.pending.pop(frame, None)
            if found is not None:
                frame.f_trace_lines = False
                kind, exc, tb, line = found
                if sys.exc_info()[1] is exc and not any(seen is exc for seen in self.counted):
                    self.counted.append(exc)
                    self.on_exception(kind, exc, tb, frame, line)
        elif event == "return":
            self.pending.pop(frame, None)  # it left this frame unhandled (or the frame ended normally)
        return self._local


def describe_exception(kind: type, exc: BaseException, tb: Any, frame: Any, line: int,
                       user_path: Callable[[str], Optional[str]]) -> dict[str, Any]:
    """The raise point (the traceback's last frame), the user's frame it reached, and a key that survives
    a rewrite's line shifts (type, file name and function of the raise point)."""
    last = tb
    while last is not None and last.tb_next is not None:
        last = last.tb_next
    raised_file, raised_line, raised_func = "?", 0, "?"
    if last is not None:
        code = last.tb_frame.f_code
        raised_file = user_path(code.co_filename) or code.co_filename
        raised_line, raised_func = last.tb_lineno, code.co_name
    reached = user_path(frame.f_code.co_filename) or frame.f_code.co_filename
    name = raised_file.rsplit("/", 1)[-1]
    return {"type": kind.__name__, "message": str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "",
            "raised_at": f"{raised_file}:{raised_line}", "function": raised_func,
            "reached": f"{reached}:{line}", "key": f"{kind.__name__} in {name}:{raised_func}"}


class RangeProbe:
    """Inside 16-bit autocast regions: the largest magnitude each op produced and the epsilons it added.

    Used as a torch function mode (installed by `make_range_probe`), entered and left with the
    autocast region; ops run unchanged. Only 16-bit outputs count: those are what the region
    computes in float16 on a GPU (float32 outputs, from ops autocast keeps in float32, do not).
    """

    def __init__(self, torch: Any, where: Callable[[], Optional[tuple[str, int]]], step: Callable[[], int]) -> None:
        self.torch = torch
        self.where = where
        self.step = step
        self.half = (torch.float16, torch.bfloat16)
        self.max_abs = 0.0
        self.max_at: Optional[dict[str, Any]] = None
        self.min_nonzero: Optional[float] = None
        self.overflows: list[dict[str, Any]] = []
        self.epsilons: list[dict[str, Any]] = []
        self.ops = 0
        self.dtypes: set[str] = set()

    def inspect(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        torch = self.torch
        name = getattr(func, "__name__", str(func))
        if name in SAME_VALUES:
            return
        outputs = out if isinstance(out, (tuple, list)) else (out,)
        step = self.step()
        for tensor in outputs:
            if not isinstance(tensor, torch.Tensor) or tensor.dtype not in self.half or tensor.numel() == 0:
                continue
            self.ops += 1
            self.dtypes.add(str(tensor.dtype).replace("torch.", ""))
            magnitude = tensor.detach().abs()
            if step % MIN_EVERY == 1 or MIN_EVERY == 1:  # the smallest non-zero value costs a second pass
                pair = torch.stack([magnitude.amax(), torch.where(magnitude > 0, magnitude, math.inf).amin()])
                largest, smallest = (float(v) for v in pair.tolist())
                if math.isfinite(smallest) and (self.min_nonzero is None or smallest < self.min_nonzero):
                    self.min_nonzero = smallest
            else:
                largest = float(magnitude.amax())
            if not math.isfinite(largest) or largest > self.max_abs:
                self.max_abs = largest if math.isfinite(largest) else math.inf
                self.max_at = self._finding(name, largest)
            if (not math.isfinite(largest) or largest > FLOAT16_MAX) and len(self.overflows) < MAX_LISTED:
                self.overflows.append(self._finding(name, largest))
        if name in ARITHMETIC and len(self.epsilons) < MAX_LISTED:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if any(t.dtype in self.half for t in tensors):
                for value in (*args, *(kwargs or {}).values()):
                    scalar = _scalar(torch, value)
                    if scalar is not None and 0 < abs(scalar) < FLOAT16_TINY:
                        self.epsilons.append(self._finding(name, scalar))
                        break

    def _finding(self, func: str, value: float) -> dict[str, Any]:
        place = self.where()
        return {"func": func, "value": value if math.isfinite(value) else None, "step": self.step(),
                "where": f"{place[0]}:{place[1]}" if place else None}

    def summary(self) -> dict[str, Any]:
        return {"ops": self.ops, "dtypes": sorted(self.dtypes), "max_abs": self.max_abs, "max_at": self.max_at,
                "min_nonzero_every": MIN_EVERY,
                "min_nonzero": self.min_nonzero, "overflows": self.overflows, "epsilons": self.epsilons,
                "float16_max": FLOAT16_MAX, "float16_tiny": FLOAT16_TINY}


def _scalar(torch: Any, value: Any) -> Optional[float]:
    if isinstance(value, float):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point() and value.dim() == 0:
        try:
            return float(value)
        except (RuntimeError, ValueError):
            return None
    return None


def make_range_probe(torch: Any, probe: RangeProbe) -> Any:
    """A torch function mode that hands every result to `probe`; the mode is off while the probe reads."""
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            try:
                probe.inspect(func, args, kwargs, out)
            except (RuntimeError, TypeError, ValueError):
                pass  # a result the probe cannot read (sparse, meta) is left alone
            return out

    return Mode()


class GlobalRngProbe:
    """Whether fetching a batch advanced torch's, Python's or numpy's process-wide generator."""

    def __init__(self, torch: Any, limit: int = 3) -> None:
        self.torch = torch
        self.limit = limit
        self.checked = 0
        self.drawn: dict[str, str] = {}  # generator -> the dataset class that drew from it

    def wrap(self, fetch: Callable[..., Any], active: Callable[[], bool]) -> Callable[..., Any]:
        probe = self

        def checked_fetch(fetcher: Any, *args: Any, **kwargs: Any) -> Any:
            if not active() or probe.checked >= probe.limit:
                return fetch(fetcher, *args, **kwargs)
            probe.checked += 1
            before = probe._states()
            result = fetch(fetcher, *args, **kwargs)
            after = probe._states()
            dataset = type(getattr(fetcher, "dataset", None)).__name__
            for name, state in before.items():
                if not _same(probe.torch, state, after.get(name)):
                    probe.drawn.setdefault(name, dataset)
            return result

        return checked_fetch

    def _states(self) -> dict[str, Any]:
        states = {"torch": self.torch.random.get_rng_state(), "random": random.getstate()}
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            try:
                states["numpy"] = numpy.random.get_state()
            except (AttributeError, ValueError):
                pass
        return states


def _same(torch: Any, a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and bool(torch.equal(a, b))
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(_same(torch, x, y) for x, y in zip(a, b))
    try:
        equal = a == b
        return bool(equal.all()) if hasattr(equal, "all") else bool(equal)
    except (TypeError, ValueError):
        return False
