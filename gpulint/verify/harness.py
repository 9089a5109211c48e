"""Run a user's training script unmodified and measure it from outside.

    python -m gpulint.verify.harness --script train.py --events run.jsonl --steps 60 -- --epochs 1

One run per fresh process (the parent starts one for the original and one for the rewrite).
Python, NumPy and torch are seeded identically and deterministic algorithms are switched on
before the script starts. A training step ends at an optimizer step (a global optimizer
post-hook; `GradScaler.step` counts once even when it skips the optimizer); the losses are
taken at `torch.autograd.backward`, through `GradScaler.scale` the unscaled ones. The device
is synchronised only at step boundaries. After `--steps` steps a private BaseException stops
the script. Results go to the events file as JSON lines (see events.py).
"""

from __future__ import annotations

import argparse
import gc
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

from gpulint.verify import events

EXIT_OK, EXIT_SCRIPT_FAILED, EXIT_USAGE = 0, 1, 2

_storage_key: Any = None  # gpulint.verify.memory's, bound once torch is imported


class _StopTraining(BaseException):
    """Raised at the step boundary after --steps steps; BaseException so `except Exception` lets it pass."""


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
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's own)")
    parser.add_argument("--as-file", type=Path, default=None,
                        help="run --script as if it were this file (the original: __file__, sys.argv[0] and "
                             "sys.path[0] point there, so data paths and sibling imports resolve)")
    parser.add_argument("--no-deterministic", action="store_true")
    return parser.parse_args(argv), script_args


class Recorder:
    """Turns backward/step events into per-step records; one instance per run."""

    def __init__(self, torch: Any, writer: events.EventWriter, max_steps: int, cuda: bool, measure_saved: bool) -> None:
        self.torch = torch
        self.writer = writer
        self.max_steps = max_steps
        self.cuda = cuda
        self.measure_saved = measure_saved
        self.steps = 0
        self.backward_calls = 0
        self.optimizer_steps = 0
        self.in_backward = 0  # nested backward calls (reentrant checkpointing) are not losses
        self.in_scaler_step = 0
        self.scaler_stepped = False
        self.pending: list[Any] = []  # detached loss tensors since the last boundary
        self.scaled: list[tuple[weakref.ref, Any]] = []  # (scaled tensor, unscaled loss) from GradScaler.scale
        self.last_mark: Optional[float] = None
        self.param_keys: set = set()
        self.saved: dict = {}  # storage key -> bytes, packed since the last backward
        self.saved_peak = 0  # largest forward of the current step
        self.saved_max = 0

    # --- losses -------------------------------------------------------------------------------
    def on_scale(self, outputs: Any, result: Any) -> None:
        torch = self.torch
        pairs = [(outputs, result)]
        if isinstance(outputs, (list, tuple)) and isinstance(result, (list, tuple)):
            pairs = list(zip(outputs, result))
        for unscaled, scaled in pairs:
            if isinstance(unscaled, torch.Tensor) and isinstance(scaled, torch.Tensor) and scaled is not unscaled:
                self.scaled = self.scaled[-7:] + [(weakref.ref(scaled), unscaled.detach())]

    def on_backward(self, tensors: Any) -> None:
        torch = self.torch
        self.close_forward()
        if isinstance(tensors, torch.Tensor):
            tensor = tensors
        elif isinstance(tensors, (list, tuple)) and tensors and isinstance(tensors[0], torch.Tensor):
            tensor = tensors[0]
        else:
            return
        value = tensor.detach()
        for ref, unscaled in self.scaled:
            if ref() is tensor:
                value = unscaled
                break
        self.backward_calls += 1
        self.pending.append(value)

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
        if not self.measure_saved:
            return
        for group in optimizer.param_groups:
            for param in group["params"]:
                try:
                    self.param_keys.add(_storage_key(param))
                except (RuntimeError, NotImplementedError, AttributeError):
                    pass

    # --- step boundaries ------------------------------------------------------------------------
    def on_optimizer_step(self, optimizer: Any) -> None:
        self.optimizer_steps += 1
        self.note_params(optimizer)
        if self.in_scaler_step:
            self.scaler_stepped = True
            return
        self.boundary(skipped=False)

    def boundary(self, skipped: Union[bool, Callable[[], bool]]) -> None:
        if not self.pending:
            return  # a second optimizer stepping on the same backward belongs to the same step
        if self.cuda:
            self.torch.cuda.synchronize()
        now = time.perf_counter()
        if callable(skipped):
            skipped = skipped()  # reads device values: only after the synchronisation
        values = [float(v.float().mean()) for v in self.pending]
        loss = sum(values) / len(values)
        self.steps += 1
        saved = self.saved_peak if self.measure_saved else None
        if saved is not None:
            self.saved_max = max(self.saved_max, saved)
        self.writer.write(
            "step", step=self.steps, loss=loss,
            time_s=None if self.last_mark is None else now - self.last_mark,
            saved_bytes=saved, skipped=skipped, backward_calls=len(values),
        )
        self.pending = []
        self.saved_peak = 0
        self.last_mark = time.perf_counter()
        if self.steps >= self.max_steps:
            raise _StopTraining()


def _install(torch: Any, recorder: Recorder) -> list[Any]:
    """Patch torch's entry points; returns objects that must stay alive (hook handles, contexts)."""
    keep: list[Any] = []
    original_backward = torch.autograd.backward

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if not recorder.in_backward:
            recorder.on_backward(tensors)
        recorder.in_backward += 1
        try:
            return original_backward(tensors, *args, **kwargs)
        finally:
            recorder.in_backward -= 1

    torch.autograd.backward = backward

    scaler_cls = torch.amp.grad_scaler.GradScaler
    original_scale, original_step = scaler_cls.scale, scaler_cls.step

    def scale(self: Any, outputs: Any) -> Any:
        result = original_scale(self, outputs)
        recorder.on_scale(outputs, result)
        return result

    def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.in_scaler_step += 1
        recorder.scaler_stepped = False
        try:
            result = original_step(self, optimizer, *args, **kwargs)
        finally:
            recorder.in_scaler_step -= 1
        if not recorder.in_scaler_step:
            stepped = recorder.scaler_stepped
            recorder.boundary(skipped=lambda: not stepped or _found_inf(self, optimizer))
        return result

    scaler_cls.scale, scaler_cls.step = scale, step

    from torch.optim.optimizer import register_optimizer_step_post_hook

    keep.append(register_optimizer_step_post_hook(lambda opt, args, kwargs: recorder.on_optimizer_step(opt)))

    original_opt_init = torch.optim.Optimizer.__init__

    def opt_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_opt_init(self, *args, **kwargs)
        recorder.note_params(self)

    torch.optim.Optimizer.__init__ = opt_init

    if recorder.measure_saved:
        hooks = torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda tensor: tensor)
        hooks.__enter__()
        keep.append(hooks)
    return keep


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
    return env


def _run_script(script: Path, as_file: Path) -> None:
    """runpy for the original; for a rewritten copy the same, with __file__ set to the original."""
    if script.resolve() == as_file.resolve():
        import runpy

        runpy.run_path(str(script), run_name="__main__")
        return
    import builtins
    import types

    code = compile(script.read_bytes(), str(script), "exec")  # tracebacks show the rewritten lines
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=str(as_file), __builtins__=builtins, __loader__=None, __spec__=None,
                           __cached__=None, __package__=None)
    previous = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if previous is not None:
            sys.modules["__main__"] = previous


def _failure_location(exc: BaseException, script: Path) -> Optional[str]:
    frames = traceback.extract_tb(exc.__traceback__)
    target = str(script.resolve())
    for frame in reversed(frames):
        if os.path.abspath(frame.filename) == target:
            return f"{script.name}:{frame.lineno}"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None


def run(argv: Sequence[str]) -> int:
    options, script_args = _parse(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    writer = events.EventWriter(options.events)
    script: Path = options.script
    if not script.is_file():
        writer.write("end", status=events.ERROR, message=f"script not found: {script}")
        return EXIT_USAGE

    import torch

    global _storage_key
    from gpulint.verify.memory import storage_key as _storage_key  # one definition of "the same storage" for both measurements

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

        adapter = CpuAdapter(hide_cuda=cuda_present)
        adapter.install()
    _seed(torch, options.seed, not options.no_deterministic)
    writer.write("start", environment=_environment(torch, device))

    recorder = Recorder(torch, writer, options.steps, cuda=device == "cuda", measure_saved=device == "cpu")
    keep = _install(torch, recorder)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    as_file: Path = options.as_file or script
    sys.argv = [str(as_file), *script_args]
    sys.path[0] = str(as_file.resolve().parent)
    status, message, location, trace = events.FINISHED, "", None, None
    started = time.perf_counter()
    try:
        _run_script(script, as_file)
    except _StopTraining:
        status = events.STOPPED
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status, message = events.CRASHED, f"the script exited with status {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the user's script may raise anything
        status = events.CRASHED
        message = f"{type(exc).__name__}: {exc}".strip()[:500]
        location = _failure_location(exc, script)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
        del exc
    wall = time.perf_counter() - started
    gc.collect()  # let DataLoader iterators left in the script's frames shut their workers down

    if status == events.FINISHED and recorder.steps == 0:
        if recorder.backward_calls == 0:
            status, message = events.NO_BACKWARD, "the script ended without calling backward(): no training step to measure"
        else:
            status, message = events.NO_STEP, (
                "the script called backward() but no torch.optim optimizer stepped: no step boundary to measure")
    memory: dict[str, Any] = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if device == "cuda":
        memory["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    else:
        memory["saved_for_backward_max_bytes"] = recorder.saved_max
    writer.write(
        "end", status=status, message=message, location=location, traceback=trace, memory=memory,
        adaptations=adapter.summary() if adapter else [], backward_calls=recorder.backward_calls,
        optimizer_steps=recorder.optimizer_steps, wall_s=wall,
    )
    writer.close()
    del keep
    return EXIT_OK if status in events.COMPLETED else EXIT_SCRIPT_FAILED


def main() -> None:
    code = run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # threads or workers the script left running must not hold the run open


if __name__ == "__main__":
    main()
