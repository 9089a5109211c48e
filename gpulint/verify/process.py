"""Start one harness run in a fresh process, show its progress, enforce the timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from gpulint.verify import events
from gpulint.verify.events import RunRecord

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the gpulint package
POLL_S = 0.25
LOG_TAIL_CHARS = 3000


@dataclass(frozen=True)
class RunSpec:
    script: Path  # what runs: the original or the rewritten copy
    as_file: Path  # the original script: the rewrite runs as if it were there (__file__, sys.path[0])
    events: Path
    log: Path
    steps: int
    device: str
    seed: int = 0
    threads: Optional[int] = None
    timeout: float = 600.0
    script_args: tuple[str, ...] = ()


def harness_command(spec: RunSpec) -> list[str]:
    command = [
        sys.executable, "-m", "gpulint.verify.harness", "--script", str(spec.script), "--events", str(spec.events),
        "--steps", str(spec.steps), "--device", spec.device, "--seed", str(spec.seed), "--as-file", str(spec.as_file),
    ]
    if spec.threads:
        command += ["--threads", str(spec.threads)]
    return command + ["--", *spec.script_args]


def harness_env(spec: RunSpec) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = str(spec.seed)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    if spec.threads:
        env["OMP_NUM_THREADS"] = str(spec.threads)
    return env


def _kill(process: subprocess.Popen) -> None:
    """The harness runs in its own session: end it and any DataLoader workers it started."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_harness(spec: RunSpec, progress: Optional[Callable[[int], None]] = None) -> RunRecord:
    spec.events.unlink(missing_ok=True)
    started = time.monotonic()
    with open(spec.log, "wb") as log:
        process = subprocess.Popen(
            harness_command(spec), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=harness_env(spec), start_new_session=True,
        )
        timed_out = False
        try:
            while process.poll() is None:
                if time.monotonic() - started > spec.timeout:
                    timed_out = True
                    _kill(process)
                    break
                if progress is not None:
                    progress(events.count_steps(spec.events))
                time.sleep(POLL_S)
        except BaseException:
            _kill(process)  # Ctrl-C in the parent must not leave a training run behind
            raise
        finally:
            if process.poll() is None:
                _kill(process)
    record = events.read_events(spec.events)
    record.returncode = process.returncode
    if record.wall_s is None:
        record.wall_s = time.monotonic() - started
    record.log_tail = _tail(spec.log)
    if timed_out:
        record.status = events.TIMEOUT
        record.message = (f"no result after {spec.timeout:g} s (timeout) with {len(record.steps)} of {spec.steps} "
                          "steps done: the script hangs or is too slow for --timeout")
    elif record.status == events.DIED:
        record.message = (f"the harness process ended with status {process.returncode} before reporting "
                          "(killed, out of memory, or a crash in native code)")
    return record


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-LOG_TAIL_CHARS:].decode("utf-8", errors="replace")


def describe_failure(record: RunRecord) -> str:
    where = f" ({record.location})" if record.location else ""
    return f"{record.status}: {record.message}{where}"

