"""Run a user's training script unmodified and measure it from outside.

    python -m gpulint.verify.harness --script train.py --events run.jsonl --steps 60 -- --epochs 1

One run per fresh process, started by gpulint through the supervisor, in a sandbox (the
working directory and `__file__` are mirrors of the user's). Two kinds of run:

- checked (`--mode checked`): deterministic algorithms on; records every step's loss, the
  bytes saved for backward (CPU), which rewritten constructs ran in which steps (optimizers,
  DataLoaders, autocast regions, GradScalers, checkpoint calls) and how far the parameters the
  loss depends on moved;
- timed (`--mode timed`): the script's own settings (cudnn.benchmark, TF32, ...) and only
  what timing needs: step boundaries and losses.

A step ends at an optimizer step (a global post-hook; `GradScaler.step` counts once even when
it skips the optimizer) or, when the script builds no torch optimizer (manual `p.data.add_`),
at the next backward pass. Losses are taken at `torch.autograd.backward`, through
`GradScaler.scale` the unscaled ones, and multiplied back when gradient accumulation divided
them. After `--steps` steps the harness writes its final record and ends the process with
`os._exit`: no `except:` in the script can swallow that. Results go to the events file as
JSON lines (see events.py); under torchrun, one file per rank.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import random
import resource
import sys
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from gpulint.verify import events, guard, instruments

EXIT_OK, EXIT_SCRIPT_FAILED, EXIT_USAGE = 0, 1, 2
SAMPLE_PER_TENSOR = 65536  # parameter elements compared per tensor to tell whether the weights moved
MAX_GRAPH_NODES = 200_000
MAX_FRAMES = 40
OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # gpulint/: never the user's code
LIBRARY_ROOTS = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)})

_storage_key: Any = None  # gpulint.verify.memory's, bound once torch is imported


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    script_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="python -m gpulint.verify.harness", description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True, type=Path)
    parser.add_argument("--events", required=True, type=Path)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mode", choices=("checked", "timed"), default="checked")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's own)")
    parser.add_argument("--mirror", default=None, help="the sandbox folder that mirrors the user's paths")
    parser.add_argument("--user-root", action="append", default=[], help="the user's folders (project, cwd)")
    parser.add_argument("--path", action="append", default=[], help="prepend to sys.path (project roots)")
    parser.add_argument("--perturb", type=int, default=None,
                        help="noise-floor run: nudge the initial parameters by one ulp (the seed picks directions)")
    parser.add_argument("--perturb-bits", type=int, default=None,
                        help="the nudge is one ulp of a float with this many mantissa bits (10: float16, "
                             "7: bfloat16); default: the parameter's own")
    parser.add_argument("--float16", choices=("native", "bfloat16"), default="bfloat16",
                        help="on the CPU, run float16 autocast as float16, or as bfloat16 (bfloat16 emulation)")
    parser.add_argument("--probe-ranges", action="store_true",
                        help="record float16 range findings inside 16-bit autocast regions (checked runs)")
    return parser.parse_args(argv), script_args


class _Tags:
    """Which construct site an object (optimizer, DataLoader, autocast, ...) was built at."""

    def __init__(self) -> None:
        self._weak: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self._strong: dict[int, int] = {}

    def set(self, obj: Any, site: int) -> None:
        try:
            self._weak[obj] = site
        except TypeError:
            self._strong[id(obj)] = site

    def get(self, obj: Any) -> Optional[int]:
        try:
            return self._weak.get(obj)
        except TypeError:
            return self._strong.get(id(obj))


class Recorder:
    """Turns backward/step events into per-step records; one instance per run."""

    def __init__(self, torch: Any, writer: events.EventWriter, options: argparse.Namespace, cuda: bool) -> None:
        self.torch = torch
        self.writer = writer
        self.max_steps = options.steps
        self.warmup = options.warmup
        self.checked = options.mode == "checked"
        self.cuda = cuda
        self.measure_saved = self.checked and not cuda
        self.mirror = os.path.realpath(options.mirror) if options.mirror else None
        self.user_roots = [os.path.realpath(p) for p in options.user_root]
        self.pid = os.getpid()
        self.steps = 0
        self.backward_calls = 0
        self.optimizer_steps = 0
        self.optimizers_built = 0
        self.step_mode: Optional[str] = None  # decided at the first backward
        self.in_backward = 0  # nested backward calls (reentrant checkpointing) are not losses
        self.in_scaler_step = 0
        self.scaler_stepped = False
        self.pending: list[tuple[Any, Optional[tuple[str, Any]]]] = []  # (detached loss, accumulation scaling)
        self.scaled: list[tuple[weakref.ref, Any, Optional[tuple[str, Any]]]] = []  # from GradScaler.scale
        self.last_mark: Optional[float] = None
        self.param_keys: set = set()
        self.saved: dict = {}  # storage key -> bytes, packed since the last backward
        self.saved_peak = 0  # largest forward of the current step
        self.saved_max = 0
        self.tags = _Tags()
        self.site_ids: dict[tuple, int] = {}
        self.uses: dict[int, dict[str, int]] = {}
        # id(param) -> (param, index, first values); the parameter is held, so a script that drops its model
        # before it ends by itself is still measured at exit
        self.snapshots: dict[int, tuple[Any, Any, Any]] = {}
        self.finisher: Optional[Callable[[str, str], None]] = None
        self.no_step_limit = max(1000, 50 * self.max_steps)
        self.perturb: Optional[int] = options.perturb if self.checked else None
        self.perturb_bits: Optional[int] = options.perturb_bits
        self.nudged: set[int] = set()
        self.nudged_tensors = 0
        self.exceptions: dict[str, int] = {}  # key -> count (checked runs)
        self.exception_samples: list[dict[str, Any]] = []
        self.counter: Optional[instruments.ExceptionCounter] = None
        if self.checked:
            self.counter = instruments.ExceptionCounter(self.user_path, self.on_exception)
        self.ranges: Optional[instruments.RangeProbe] = None
        self.range_mode: Any = None
        self.range_depth = 0
        if self.checked and options.probe_ranges:
            self.ranges = instruments.RangeProbe(torch, self.innermost_user_frame, lambda: self.steps + 1)
            self.range_mode = instruments.make_range_probe(torch, self.ranges)
        self.rng = instruments.GlobalRngProbe(torch) if self.checked else None

    def active(self) -> bool:
        """Hooks are inherited by forked DataLoader workers; only the harness process records."""
        return os.getpid() == self.pid

    # --- construct sites (checked runs) -------------------------------------------------------------
    def user_frames(self) -> list[tuple[str, int]]:
        frames: list[tuple[str, int]] = []
        frame = sys._getframe(2)
        while frame is not None and len(frames) < MAX_FRAMES:
            filename = frame.f_code.co_filename
            original = self.user_path(filename)
            if original is not None:
                frames.append((original, frame.f_lineno))
            frame = frame.f_back  # type: ignore[assignment]
        return frames

    def user_path(self, filename: str) -> Optional[str]:
        if not filename or filename.startswith("<") or filename.startswith(OWN_PACKAGE + os.sep):
            return None
        if filename.startswith(LIBRARY_ROOTS) or "site-packages" in filename or "dist-packages" in filename:
            return None  # torch and other installed libraries, even in a virtualenv inside the project
        if self.mirror and filename.startswith(self.mirror + os.sep):
            return filename[len(self.mirror):]
        if any(filename.startswith(root + os.sep) for root in self.user_roots):
            return filename
        return None

    def innermost_user_frame(self) -> Optional[tuple[str, int]]:
        frames = self.user_frames()
        return frames[0] if frames else None

    def site(self, obj: Any, kind: str, details: dict[str, Any]) -> Optional[int]:
        if not self.checked or not self.active():
            return None
        frames = self.user_frames()
        key = (kind, tuple(frames), json.dumps(details, sort_keys=True, default=str))
        site = self.site_ids.get(key)
        if site is None:
            site = self.site_ids[key] = len(self.site_ids) + 1
            self.writer.write("site", id=site, kind=kind, frames=frames, details=details)
        if obj is not None:
            self.tags.set(obj, site)
        return site

    def phase(self) -> str:
        current = self.steps + 1
        return events.PHASE_TIMED if current > max(self.warmup, 1) else events.PHASE_WARMUP

    def use(self, site: Optional[int]) -> None:
        if site is None or not self.active():
            return
        phase = self.phase()
        counts = self.uses.setdefault(site, {})
        if phase not in counts:
            self.writer.write("use", site=site, phase=phase, step=self.steps + 1)
        counts[phase] = counts.get(phase, 0) + 1

    def use_obj(self, obj: Any) -> None:
        if self.checked:
            self.use(self.tags.get(obj))

    # --- did it train (checked runs) ---------------------------------------------------------------
    def track(self, params: Any) -> None:
        if not self.checked or not self.active():
            return
        torch = self.torch
        for param in params:
            if not isinstance(param, torch.Tensor) or id(param) in self.snapshots:
                continue
            try:
                flat = param.detach().reshape(-1)
                count = flat.numel()
                if count == 0 or not (flat.is_floating_point() or flat.is_complex()):
                    continue
                index = None
                if count > SAMPLE_PER_TENSOR:
                    index = torch.linspace(0, count - 1, SAMPLE_PER_TENSOR, device=flat.device).long()
                values = (flat if index is None else flat[index]).to("cpu", torch.float64, copy=True)
                self.snapshots[id(param)] = (param, index, values)
            except (RuntimeError, TypeError):
                continue

    def track_graph(self, tensor: Any) -> None:
        """The leaves the loss depends on: what training must move (no optimizer needed to find them)."""
        grad_fn = getattr(tensor, "grad_fn", None)
        seen: set = set()
        stack = [grad_fn]
        leaves = []
        while stack and len(seen) < MAX_GRAPH_NODES:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            variable = getattr(node, "variable", None)
            if variable is not None:
                leaves.append(variable)
            stack.extend(child for child, _ in getattr(node, "next_functions", ()))
        self.track(leaves)

    def training_summary(self) -> dict[str, Any]:
        torch = self.torch
        changed_sq = initial_sq = 0.0
        tensors = changed_tensors = elements = 0
        for param, index, first in self.snapshots.values():
            try:
                flat = param.detach().reshape(-1)
                now = (flat if index is None else flat[index]).to("cpu", torch.float64)
            except RuntimeError:
                continue
            if now.shape != first.shape:
                continue
            delta = now - first
            d = float((delta * delta).sum())
            tensors += 1
            elements += first.numel()
            if d > 0 or not math.isfinite(d):
                changed_tensors += 1
            changed_sq += d
            initial_sq += float((first * first).sum())
        change = math.sqrt(changed_sq) if math.isfinite(changed_sq) else math.inf
        relative = change / math.sqrt(initial_sq) if initial_sq > 0 else change
        return {"tensors": tensors, "elements_compared": elements, "changed_tensors": changed_tensors,
                "change_norm": change, "initial_norm": math.sqrt(initial_sq), "relative_change": relative,
                "moved": changed_tensors > 0}

    def nudge(self, params: Any) -> None:
        """Noise-floor runs: one ulp on every initial parameter, before the first step uses it."""
        if self.perturb is None or not self.active():
            return
        fresh = [p for p in params if isinstance(p, self.torch.Tensor) and id(p) not in self.nudged]
        if not fresh:
            return
        self.nudged.update(id(p) for p in fresh)
        self.nudged_tensors += instruments.nudge(self.torch, fresh, self.perturb, len(self.nudged),
                                                 self.perturb_bits)
        for param in fresh:  # the starting point of "did the weights move" is the nudged value
            if id(param) in self.snapshots:
                del self.snapshots[id(param)]
                self.track([param])

    # --- exceptions inside the training steps (checked runs) ------------------------------------
    def start_counting(self) -> None:
        if self.counter is not None and self.active():
            self.counter.start()

    def on_exception(self, kind: type, exc: BaseException, tb: Any, frame: Any, line: int) -> None:
        if not self.active():
            return
        found = instruments.describe_exception(kind, exc, tb, frame, line, self.user_path)
        key = found["key"]
        self.exceptions[key] = self.exceptions.get(key, 0) + 1
        if self.exceptions[key] == 1 and len(self.exception_samples) < 20:
            found["step"] = self.steps + 1
            self.exception_samples.append(found)
            self.writer.write("exception", **found)

    # --- float16 range probe (checked runs of a mixed-precision rewrite) -------------------------
    def enter_region(self, autocast: Any) -> None:
        if self.range_mode is None or not self.active():
            return
        dtype = getattr(autocast, "fast_dtype", None)
        if not getattr(autocast, "_enabled", True) or dtype not in (self.torch.float16, self.torch.bfloat16):
            return
        self.range_depth += 1
        if self.range_depth == 1:
            self.range_mode.__enter__()

    def leave_region(self, autocast: Any) -> None:
        if self.range_mode is None or not self.active() or self.range_depth == 0:
            return
        dtype = getattr(autocast, "fast_dtype", None)
        if not getattr(autocast, "_enabled", True) or dtype not in (self.torch.float16, self.torch.bfloat16):
            return
        self.range_depth -= 1
        if self.range_depth == 0:
            self.range_mode.__exit__(None, None, None)

    # --- losses -------------------------------------------------------------------------------
    @staticmethod
    def accumulation_scale(tensor: Any) -> Optional[tuple[str, Any]]:
        """("div", d) or ("mul", f) when the loss was divided or multiplied by a constant just before backward."""
        node = getattr(tensor, "grad_fn", None)
        name = type(node).__name__
        if name not in ("DivBackward0", "MulBackward0"):
            return None
        try:
            other = node._saved_other  # type: ignore[union-attr]  # AttributeError is handled
        except (AttributeError, RuntimeError):
            return None
        if getattr(other, "numel", lambda: 2)() != 1 or getattr(other, "requires_grad", True):
            return None
        return ("div" if name == "DivBackward0" else "mul", other.detach())

    def on_scale(self, outputs: Any, result: Any) -> None:
        torch = self.torch
        pairs = [(outputs, result)]
        if isinstance(outputs, (list, tuple)) and isinstance(result, (list, tuple)):
            pairs = list(zip(outputs, result))
        for unscaled, scaled in pairs:
            if isinstance(unscaled, torch.Tensor) and isinstance(scaled, torch.Tensor) and scaled is not unscaled:
                entry = (weakref.ref(scaled), unscaled.detach(), self.accumulation_scale(unscaled))
                self.scaled = self.scaled[-7:] + [entry]

    def on_backward(self, tensors: Any) -> None:
        torch = self.torch
        if isinstance(tensors, torch.Tensor):
            tensor = tensors
        elif isinstance(tensors, (list, tuple)) and tensors and isinstance(tensors[0], torch.Tensor):
            tensor = tensors[0]
        else:
            return
        if self.step_mode is None:
            self.step_mode = "optimizer" if self.optimizers_built else "backward"
        if self.step_mode == "backward" and self.pending:
            self.boundary(skipped=False)  # the previous backward's step is complete
        self.close_forward()
        if self.checked and self.steps == 0:
            self.track_graph(tensor)
            self.start_counting()
        value, scale = tensor.detach(), self.accumulation_scale(tensor)
        for ref, unscaled, unscaled_scale in self.scaled:
            if ref() is tensor:
                value, scale = unscaled, unscaled_scale
                break
        self.backward_calls += 1
        self.pending.append((value, scale))
        if self.step_mode == "optimizer" and not self.optimizer_steps and self.backward_calls > self.no_step_limit:
            self.stop(events.NO_STEP, f"backward() ran {self.backward_calls} times but no torch.optim optimizer "
                                      "ever stepped: no step boundary to measure")

    def step_loss(self) -> tuple[float, bool]:
        """The step's loss: the mean of its backward losses, or their sum when each was divided by their count."""
        values = [float(v.float().mean()) for v, _ in self.pending]
        count = len(values)
        if count > 1:
            factors = []
            for _, scale in self.pending:
                if scale is None:
                    break
                kind, other = scale
                factor = float(other)
                factors.append(factor if kind == "div" else (1 / factor if factor else math.inf))
            if len(factors) == count and all(abs(f - count) <= 1e-6 * count for f in factors):
                return sum(values), True
        return sum(values) / count, False

    # --- saved tensors (CPU memory measurement) -------------------------------------------------
    def pack(self, tensor: Any) -> Any:
        if self.in_backward:
            return tensor  # recomputation inside backward (reentrant checkpointing) is not forward memory
        # Only sizes are kept: holding the storages would keep alive the graphs of forwards that
        # never reach a backward. A saved storage lives until its backward, so addresses stay unique.
        try:
            key = _storage_key(tensor)
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError, AttributeError):
            return tensor
        if key not in self.saved and key not in self.param_keys and storage.data_ptr() != 0:
            self.saved[key] = storage.nbytes()
        return tensor

    def close_forward(self) -> None:
        """At the start of a backward: what the forward saved is now complete."""
        if self.saved:
            total = sum(self.saved.values())
            self.saved_peak = max(self.saved_peak, total)
            self.saved = {}

    def note_params(self, optimizer: Any) -> None:
        """Parameters are saved for backward too (a Linear saves its weight); they are not activations."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.track(params)
        if not self.measure_saved:
            return
        for param in params:
            try:
                self.param_keys.add(_storage_key(param))
            except (RuntimeError, NotImplementedError, AttributeError):
                pass

    # --- step boundaries ------------------------------------------------------------------------
    def on_optimizer_step(self, optimizer: Any) -> None:
        self.optimizer_steps += 1
        self.use_obj(optimizer)
        if self.measure_saved:
            self.note_params(optimizer)
        if self.in_scaler_step:
            self.scaler_stepped = True
            return
        if self.step_mode != "backward":
            self.boundary(skipped=False)

    def boundary(self, skipped: Union[bool, Callable[[], bool]], final: bool = False) -> None:
        if not self.pending:
            return  # a second optimizer stepping on the same backward belongs to the same step
        if self.cuda:
            self.torch.cuda.synchronize()
        now = time.perf_counter()
        if callable(skipped):
            skipped = skipped()  # reads device values: only after the synchronisation
        loss, unscaled = self.step_loss()
        self.steps += 1
        saved = self.saved_peak if self.measure_saved else None
        if saved is not None:
            self.saved_max = max(self.saved_max, saved)
        self.writer.write(
            "step", step=self.steps, loss=loss,
            time_s=None if self.last_mark is None else now - self.last_mark,
            saved_bytes=saved, skipped=skipped, backward_calls=len(self.pending),
            accumulation_unscaled=unscaled,
        )
        self.pending = []
        self.saved_peak = 0
        if self.counter is not None:
            self.counter.forget()
        if self.step_mode == "backward" and self.steps == 1 and self.perturb is not None:
            self.nudge([entry[0] for entry in self.snapshots.values()])  # no optimizer: the graph's leaves
        self.last_mark = time.perf_counter()
        if self.steps >= self.max_steps and not final:
            self.stop(events.STOPPED, "")

    def stop(self, status: str, message: str) -> None:
        """End the run now, in a way the script cannot catch: final record, then os._exit."""
        if self.finisher is not None:
            self.finisher(status, message)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK if status in events.COMPLETED else EXIT_SCRIPT_FAILED)


def _install(torch: Any, recorder: Recorder) -> list[Any]:
    """Patch torch's entry points; returns objects that must stay alive (hook handles, contexts)."""
    keep: list[Any] = []
    original_backward = torch.autograd.backward

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if not recorder.in_backward and recorder.active():
            recorder.on_backward(tensors)
        recorder.in_backward += 1
        try:
            return original_backward(tensors, *args, **kwargs)
        finally:
            recorder.in_backward -= 1

    torch.autograd.backward = backward

    scaler_cls = torch.amp.grad_scaler.GradScaler
    original_scaler_init, original_scale, original_step = scaler_cls.__init__, scaler_cls.scale, scaler_cls.step

    @functools.wraps(original_scaler_init)
    def scaler_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_scaler_init(self, *args, **kwargs)
        recorder.site(self, "grad_scaler", {"enabled": bool(getattr(self, "_enabled", True)),
                                            "device": str(getattr(self, "_device", "?"))})

    def scale(self: Any, outputs: Any) -> Any:
        result = original_scale(self, outputs)
        if recorder.active():
            recorder.on_scale(outputs, result)
            recorder.use_obj(self)
        return result

    def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.in_scaler_step += 1
        recorder.scaler_stepped = False
        try:
            result = original_step(self, optimizer, *args, **kwargs)
        finally:
            recorder.in_scaler_step -= 1
        if not recorder.in_scaler_step and recorder.active() and recorder.step_mode != "backward":
            stepped = recorder.scaler_stepped
            recorder.boundary(skipped=lambda: not stepped or _found_inf(self, optimizer))
        return result

    scaler_cls.__init__, scaler_cls.scale, scaler_cls.step = scaler_init, scale, step

    from torch.optim.optimizer import register_optimizer_step_post_hook

    keep.append(register_optimizer_step_post_hook(
        lambda opt, args, kwargs: recorder.on_optimizer_step(opt) if recorder.active() else None))

    original_opt_init = torch.optim.Optimizer.__init__

    @functools.wraps(original_opt_init)
    def opt_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_opt_init(self, *args, **kwargs)
        if not recorder.active():
            return
        recorder.optimizers_built += 1
        recorder.nudge([p for group in self.param_groups for p in group["params"]])
        recorder.start_counting()
        defaults = getattr(self, "defaults", {}) or {}
        recorder.site(self, "optimizer", {"class": type(self).__name__, "fused": defaults.get("fused"),
                                          "foreach": defaults.get("foreach")})
        if recorder.checked:
            recorder.note_params(self)

    torch.optim.Optimizer.__init__ = opt_init

    if recorder.checked:
        _install_construct_hooks(torch, recorder)
    if recorder.measure_saved:
        hooks = torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda tensor: tensor)
        hooks.__enter__()
        keep.append(hooks)
    return keep


def _install_construct_hooks(torch: Any, recorder: Recorder) -> None:
    """Where DataLoaders, autocast regions, checkpoint calls and custom_fwd functions are built and used."""
    from torch.utils.data import dataloader as dl

    loader_init = dl.DataLoader.__init__

    @functools.wraps(loader_init)
    def loader_init_hook(self: Any, *args: Any, **kwargs: Any) -> None:
        loader_init(self, *args, **kwargs)
        recorder.site(self, "dataloader", {"num_workers": getattr(self, "num_workers", None),
                                           "pin_memory": getattr(self, "pin_memory", None),
                                           "persistent_workers": getattr(self, "persistent_workers", None),
                                           "generator": getattr(self, "generator", None) is not None})

    dl.DataLoader.__init__ = loader_init_hook  # type: ignore[method-assign]

    iter_init, iter_next = dl._BaseDataLoaderIter.__init__, dl._BaseDataLoaderIter.__next__

    @functools.wraps(iter_init)
    def iter_init_hook(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        iter_init(self, loader, *args, **kwargs)
        site = recorder.tags.get(loader)
        if site is not None:
            recorder.tags.set(self, site)

    @functools.wraps(iter_next)
    def iter_next_hook(self: Any) -> Any:
        result = iter_next(self)
        recorder.use_obj(self)  # counted when a batch arrives: an exhausted loader used nothing
        return result

    dl._BaseDataLoaderIter.__init__ = iter_init_hook  # type: ignore[method-assign]
    dl._BaseDataLoaderIter.__next__ = iter_next_hook  # type: ignore[method-assign]

    if recorder.rng is not None:
        from torch.utils.data._utils import fetch

        for fetcher in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
            fetcher.fetch = recorder.rng.wrap(fetcher.fetch, recorder.active)  # type: ignore[method-assign]

    autocast = torch.amp.autocast_mode.autocast
    autocast_init, autocast_enter, autocast_exit = autocast.__init__, autocast.__enter__, autocast.__exit__

    @functools.wraps(autocast_init)
    def autocast_init_hook(self: Any, *args: Any, **kwargs: Any) -> None:
        autocast_init(self, *args, **kwargs)
        ran = str(getattr(self, "fast_dtype", ""))
        recorder.site(self, "autocast", {"device_type": getattr(self, "device", None), "dtype": ran,
                                         "requested": str(getattr(self, "_gpulint_requested", ran)),
                                         "enabled": bool(getattr(self, "_enabled", True))})

    @functools.wraps(autocast_enter)
    def autocast_enter_hook(self: Any) -> Any:
        recorder.use_obj(self)
        entered = autocast_enter(self)
        recorder.enter_region(self)
        return entered

    @functools.wraps(autocast_exit)
    def autocast_exit_hook(self: Any, *exc: Any) -> Any:
        recorder.leave_region(self)
        return autocast_exit(self, *exc)

    autocast.__init__, autocast.__enter__, autocast.__exit__ = autocast_init_hook, autocast_enter_hook, \
        autocast_exit_hook

    import torch.utils.checkpoint as ckpt

    def wrap_checkpoint(name: str) -> None:
        original = getattr(ckpt, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            site = recorder.site(None, "checkpoint", {"function": name, "use_reentrant": kwargs.get("use_reentrant")})
            recorder.use(site)
            return original(*args, **kwargs)

        setattr(ckpt, name, call)

    wrap_checkpoint("checkpoint")
    wrap_checkpoint("checkpoint_sequential")

    import torch.nn.functional as functional

    original_sdpa = getattr(functional, "scaled_dot_product_attention", None)
    if original_sdpa is not None:  # GPU403's rewrite: a fused attention call in the step
        @functools.wraps(original_sdpa)
        def sdpa(*args: Any, **kwargs: Any) -> Any:
            site = recorder.site(None, "attention", {"is_causal": bool(kwargs.get("is_causal", False)),
                                                     "mask": kwargs.get("attn_mask") is not None})
            recorder.use(site)
            return original_sdpa(*args, **kwargs)

        functional.scaled_dot_product_attention = sdpa

    def wrap_foreach(name: str) -> None:  # GPU507's rewrite: one multi-tensor call for a per-parameter loop
        original = getattr(torch, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            tensors = args[0] if args else kwargs.get("self", ())
            count = len(tensors) if isinstance(tensors, (list, tuple)) else None
            recorder.use(recorder.site(None, "foreach", {"function": name, "tensors": count}))
            return original(*args, **kwargs)

        setattr(torch, name, call)

    for name in ("_foreach_lerp_", "_foreach_mul_", "_foreach_add_"):
        wrap_foreach(name)

    amp_mode = torch.amp.autocast_mode
    original_custom_fwd = getattr(amp_mode, "custom_fwd", None)
    if original_custom_fwd is not None:
        @functools.wraps(original_custom_fwd)
        def custom_fwd(fwd: Any = None, **kwargs: Any) -> Any:
            if fwd is None:
                return lambda f: custom_fwd(f, **kwargs)
            site = recorder.site(None, "custom_fwd", {"device_type": kwargs.get("device_type"),
                                                      "cast_inputs": str(kwargs.get("cast_inputs"))})
            decorated = original_custom_fwd(fwd, **kwargs)

            @functools.wraps(decorated)
            def run(*args: Any, **inner: Any) -> Any:
                recorder.use(site)
                return decorated(*args, **inner)

            return run

        amp_mode.custom_fwd = custom_fwd
        torch.amp.custom_fwd = custom_fwd


def _found_inf(scaler: Any, optimizer: Any) -> bool:
    """Whether the scaler saw inf/nan gradients this step (fused optimizers then skip inside step())."""
    state = getattr(scaler, "_per_optimizer_states", {}).get(id(optimizer), {})
    return any(float(v) > 0 for v in state.get("found_inf_per_device", {}).values())


def _seed(torch: Any, seed: int, deterministic: bool) -> None:
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def cpu_bf16(torch: Any) -> str:
    """"native" (bf16 instructions), "converted" (AVX-512 without them) or "emulated" (the slow case)."""
    try:
        supported = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        supported = False
    capability = ""
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        pass
    if not supported or capability in ("DEFAULT", "AVX2", "NO AVX", "ZVECTOR", "VSX"):
        return "emulated"
    flags = cpu_flags()
    if flags is not None and not flags & {"avx512_bf16", "amx_bf16"}:
        return "converted"
    return "native"


def cpu_fp16() -> str:
    """"native" (AVX512-FP16 or AMX-FP16 instructions) or "slow": CPU float16 autocast then runs
    through conversions, several times slower than float32 (8x on this project's build machine)."""
    flags = cpu_flags()
    return "native" if flags and flags & {"avx512_fp16", "amx_fp16"} else "slow"


def cpu_flags() -> Optional[set[str]]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def _environment(torch: Any, device: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": device,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }
    if device == "cuda":
        env["device_name"] = torch.cuda.get_device_name(0)
        env["cudnn"] = torch.backends.cudnn.version()
    else:
        env["device_name"] = platform.processor() or platform.machine() or "cpu"
        try:
            env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        except AttributeError:
            pass
        env["cpu_bf16"] = cpu_bf16(torch)
        env["cpu_fp16"] = cpu_fp16()
    return env


def _failure_location(exc: BaseException, script: Path, recorder: Optional[Recorder]) -> Optional[str]:
    frames = traceback.extract_tb(exc.__traceback__)
    target = str(script.resolve())
    for frame in reversed(frames):
        if os.path.abspath(frame.filename) == target:
            return f"{script.name}:{frame.lineno}"
    if recorder is not None:
        for frame in reversed(frames):
            original = recorder.user_path(os.path.abspath(frame.filename))
            if original is not None:
                return f"{Path(original).name}:{frame.lineno}"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None


def _imported(recorder: Recorder) -> list[dict[str, str]]:
    """The project's own modules this run imported, and whether from the sandbox (rewritten) or not."""
    found = []
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        # torch.ops and torch.classes are objects whose __file__ is a bare "_ops.py"/"_classes.py": relative to
        # nothing, they would resolve into the working directory as files of the user's that do not exist
        if not isinstance(filename, str) or not os.path.isabs(filename) or not os.path.isfile(filename):
            continue
        filename = os.path.realpath(filename)
        if recorder.mirror and filename.startswith(recorder.mirror + os.sep):
            found.append({"path": filename[len(recorder.mirror):], "from": "sandbox"})
        elif any(filename.startswith(root + os.sep) for root in recorder.user_roots):
            found.append({"path": filename, "from": "user"})
    return sorted(found, key=lambda item: item["path"])


def _wrap_savers(torch: Any, active: guard.Guard) -> None:
    """torch.save and torch.jit.save write from C++, out of the audit hook's sight: check their paths."""
    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(f, (str, bytes, os.PathLike)):
                active.check_write(f)
            return original(obj, f, *args, **kwargs)

        setattr(owner, name, save)

    wrap(torch, "save")
    wrap(torch.jit, "save")


def run(argv: Sequence[str]) -> int:
    options, script_args = _parse(argv)
    rank = int(os.environ.get("RANK", "0") or 0)
    world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    writer = events.EventWriter(events.rank_path(options.events, rank))
    active_guard = guard.installed() or guard.install_from_env()
    script: Path = options.script
    if not script.is_file():
        writer.write("end", status=events.ERROR, message=f"script not found: {script}")
        return EXIT_USAGE

    import torch

    global _storage_key
    # one definition of "the same storage" for both measurements
    from gpulint.verify.memory import storage_key as _storage_key

    if options.threads:
        torch.set_num_threads(options.threads)
    cuda_present = torch.cuda.is_available()
    if options.device == "cuda" and not cuda_present:
        writer.write("end", status=events.ERROR,
                     message="--device cuda was requested but torch.cuda.is_available() is False on this machine")
        return EXIT_USAGE
    device = "cuda" if options.device == "cuda" or (options.device == "auto" and cuda_present) else "cpu"

    adapter = None
    if device == "cpu":
        from gpulint.verify.devicemap import CpuAdapter

        adapter = CpuAdapter(hide_cuda=cuda_present, bf16_native=cpu_bf16(torch) != "emulated",
                             float16=options.float16)
        adapter.install()
    _seed(torch, options.seed, deterministic=options.mode == "checked")
    writer.write("start", environment=_environment(torch, device), rank=rank, world_size=world_size,
                 mode=options.mode)

    recorder = Recorder(torch, writer, options, cuda=device == "cuda")
    keep = _install(torch, recorder)
    if active_guard is not None:
        _wrap_savers(torch, active_guard)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    started = time.perf_counter()

    def finish(status: str, message: str, location: Optional[str] = None, trace: Optional[str] = None) -> None:
        recorder.finisher = None  # once
        if recorder.step_mode == "backward" and recorder.pending:
            recorder.boundary(skipped=False, final=True)
        if status == events.FINISHED and recorder.steps == 0:
            if recorder.backward_calls == 0:
                status, message = events.NO_BACKWARD, ("the script ended without calling backward(): "
                                                       "no training step to measure")
            else:
                status, message = events.NO_STEP, ("the script called backward() but no torch.optim optimizer "
                                                   "stepped: no step boundary to measure")
        memory: dict[str, Any] = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        if device == "cuda":
            memory["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
        elif recorder.measure_saved:
            memory["saved_for_backward_max_bytes"] = recorder.saved_max
        training = recorder.training_summary() if recorder.checked else {}
        if recorder.counter is not None:
            recorder.counter.stop()
        report_guard = {}
        if active_guard is not None:
            report_guard = {"blocked": list(active_guard.blocked),
                            "copied": [recorder.user_path(p) or p for p in active_guard.copied]}
        writer.write(
            "end", status=status, message=message, location=location, traceback=trace, memory=memory,
            adaptations=adapter.summary() if adapter else [], backward_calls=recorder.backward_calls,
            optimizer_steps=recorder.optimizer_steps, wall_s=time.perf_counter() - started,
            step_mode=recorder.step_mode or "optimizer", uses=recorder.uses, training=training,
            guard=report_guard, imported=_imported(recorder),
            exceptions=recorder.exceptions, exception_samples=recorder.exception_samples,
            ranges=recorder.ranges.summary() if recorder.ranges is not None else None,
            global_rng=recorder.rng.drawn if recorder.rng is not None else {},
            nudged_tensors=recorder.nudged_tensors if recorder.perturb is not None else None,
        )
        writer.close()

    recorder.finisher = lambda status, message: finish(status, message)

    sys.argv = [str(script), *script_args]
    sys.path[0] = str(script.resolve().parent)
    for extra in reversed(options.path):
        sys.path.insert(1, extra)
    status, message, location, trace = events.FINISHED, "", None, None
    try:
        import runpy

        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status, message = events.CRASHED, f"the script exited with status {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the user's script may raise anything
        status = events.CRASHED
        message = f"{type(exc).__name__}: {exc}".strip()[:500]
        location = _failure_location(exc, script, recorder)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
        del exc
    gc.collect()  # let DataLoader iterators left in the script's frames shut their workers down
    finish(status, message, location, trace)
    del keep
    if status == events.FINISHED and recorder.steps == 0:
        return EXIT_SCRIPT_FAILED
    return EXIT_OK if status in events.COMPLETED else EXIT_SCRIPT_FAILED


def main() -> None:
    code = run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # threads or workers the script left running must not hold the run open


if __name__ == "__main__":
    main()
