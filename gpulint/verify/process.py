"""Start one harness run in its own sandbox, show its progress, enforce the timeout, leave nothing behind.

Each run: a fresh sandbox folder (sandbox.py), the write guard in every Python process of the
run (guard.py, through a generated sitecustomize), the supervisor as its top process
(supervise.py: subreaper, bounded log), and afterwards a sweep for any process still carrying
the run's token. The parent reads only the tail of the log. No torch here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import field
from pathlib import Path
from typing import Callable, Mapping, Optional

from gpulint.records import dataclass
from gpulint.verify import confine, events, guard, proctree, supervise
from gpulint.verify.confine import Confinement
from gpulint.verify.events import RunRecord
from gpulint.verify.sandbox import MirrorStats, Sandbox, outermost

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the gpulint package
POLL_S = 0.05
LOG_TAIL_BYTES = 4000
LOG_MAX_BYTES = 8 << 20  # per log file; a run keeps at most two (the current one and the previous)
TERMINATE_GRACE_S = 10.0


@dataclass(frozen=True)
class RunSpec:
    script: Path  # the user's script; the run executes its mirror in the sandbox (rewritten or not)
    folder: Path  # this run's folder: events, log and the sandbox; must not exist yet
    steps: int
    device: str = "auto"
    warmup: int = 0
    mode: str = "checked"  # "checked" (deterministic, fully instrumented) or "timed" (the script's own settings)
    seed: int = 0
    threads: Optional[int] = None
    timeout: float = 600.0
    script_args: tuple[str, ...] = ()
    cwd: Optional[Path] = None  # the user's working directory (default: the current one)
    roots: tuple[Path, ...] = ()  # the user's folders the run may see (default: the script's folder and cwd)
    overrides: Mapping[Path, bytes] = field(default_factory=dict)  # rewritten files, by original path
    sys_path: tuple[Path, ...] = ()  # project roots to put on sys.path (their mirrors)
    exclude: tuple[Path, ...] = ()  # never mirrored (gpulint's own work folder)
    nproc: int = 1  # processes under torchrun
    torchrun: bool = False  # launch through torchrun (always when nproc > 1)
    harness_args: tuple[str, ...] = ()  # more harness options (noise-floor nudge, float16 mode, range probe)

    @property
    def events(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def log(self) -> Path:
        return self.folder / "output.log"

    def user_cwd(self) -> Path:
        return Path(os.path.realpath(self.cwd or os.getcwd()))

    def user_roots(self) -> list[Path]:
        return outermost(self.roots or (Path(os.path.realpath(self.script)).parent, self.user_cwd()))


def harness_command(spec: RunSpec, sandbox: Sandbox) -> list[str]:
    harness = [
        "--script", str(sandbox.mirror(spec.script)), "--events", str(spec.events),
        "--steps", str(spec.steps), "--warmup", str(spec.warmup), "--mode", spec.mode,
        "--device", spec.device, "--seed", str(spec.seed), "--mirror", str(sandbox.fs),
    ]
    for root in spec.user_roots():
        harness += ["--user-root", str(root)]
    for extra in spec.sys_path:
        harness += ["--path", str(sandbox.mirror(extra))]
    if spec.threads:
        harness += ["--threads", str(spec.threads)]
    harness += [*spec.harness_args, "--", *spec.script_args]
    if spec.nproc > 1 or spec.torchrun:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                    f"--nproc-per-node={spec.nproc}", "-m", "gpulint.verify.harness"]
        return launcher + harness
    return [sys.executable, "-m", "gpulint.verify.harness", *harness]


def guard_log(spec: RunSpec) -> Path:
    """Where every Python process of the run appends what its guard refused, copied or let through."""
    return spec.folder / "guard.jsonl"


def harness_env(spec: RunSpec, sandbox: Sandbox, token: str, site_folder: str,
                confined: Optional[Confinement] = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = str(spec.seed)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    user_path = [sandbox_path(sandbox, spec.user_roots(), p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([site_folder, str(PACKAGE_ROOT), *user_path])
    env.pop("PYTHONSTARTUP", None)
    env["TMPDIR"] = str(sandbox.tmp)
    env[proctree.TOKEN_ENV] = token
    writable = list(confined.writable + confined.caches) if confined is not None and confined.namespace else None
    env[guard.ENV] = guard.config_json([str(spec.folder), str(sandbox.tmp)], [str(r) for r in spec.user_roots()],
                                       writable=writable, log=str(guard_log(spec)))
    if spec.threads:
        env["OMP_NUM_THREADS"] = str(spec.threads)
    return env


def sandbox_path(sandbox: Sandbox, roots: list[Path], entry: str) -> str:
    """A PYTHONPATH entry inside the user's folders points to its mirror (so rewritten modules are found)."""
    real = Path(os.path.realpath(entry))
    if any(real == r or r in real.parents for r in roots):
        return str(sandbox.mirror(real))
    return entry


def _stop(process: subprocess.Popen, token: str) -> None:
    """SIGTERM the supervisor (it ends the tree), then SIGKILL whatever is left, wherever it went."""
    proctree.kill_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    proctree.end_descendants(process.pid, token, grace=0.5)
    proctree.kill_group(process.pid, signal.SIGKILL)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_harness(spec: RunSpec, progress: Optional[Callable[[int], None]] = None,
                site_folder: Optional[str] = None) -> RunRecord:
    spec.folder.mkdir(parents=True)
    sandbox = Sandbox(spec.folder)
    stats: Optional[MirrorStats] = None
    token = uuid.uuid4().hex
    site = site_folder or guard.write_site_folder(spec.folder / "site")
    started = time.monotonic()
    timed_out = False
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    overrides = dict(spec.overrides)
    script = Path(os.path.realpath(spec.script))
    if not any(Path(os.path.realpath(p)) == script for p in overrides):
        try:  # written, never linked: its folder must be a real folder of the sandbox
            overrides[script] = script.read_bytes()
        except OSError as exc:
            return RunRecord(status=events.ERROR, message=f"cannot read the script: {exc}")
    try:
        stats = sandbox.build(spec.user_roots(), overrides, exclude=spec.exclude)
    except OSError as exc:
        sandbox.remove_mirror()
        return RunRecord(status=events.ERROR, message=f"cannot prepare the run's sandbox in {spec.folder}: {exc}")
    protect = [str(r) for r in spec.user_roots()]
    confined = confine.confinement([str(spec.folder), str(sandbox.tmp)], protect)
    try:
        command = [sys.executable, "-m", "gpulint.verify.supervise", "--log", str(spec.log),
                   "--log-max", str(LOG_MAX_BYTES), "--",
                   *confine.command(confined, protect, harness_command(spec, sandbox))]
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=harness_env(spec, sandbox, token, site, confined), cwd=sandbox.mirror(spec.user_cwd()),
            start_new_session=True,
        )
        last_progress = 0.0
        try:
            while process.poll() is None:
                if time.monotonic() - started > spec.timeout:
                    timed_out = True
                    _stop(process, token)
                    break
                if progress is not None and time.monotonic() - last_progress > 0.25:
                    progress(events.count_steps(spec.events))
                    last_progress = time.monotonic()
                time.sleep(POLL_S)
        except BaseException:
            _stop(process, token)  # Ctrl-C in the parent must not leave a training run behind
            raise
        finally:
            if process.poll() is None:
                _stop(process, token)
            proctree.end_descendants(process.pid, token, grace=0.5)  # anything that escaped the supervisor
    finally:
        sandbox_problem = sandbox.remove_mirror()
    record = events.read_ranks(spec.events, spec.nproc)
    record.returncode = process.returncode
    record.load_before = load
    if record.wall_s is None:
        record.wall_s = time.monotonic() - started
    record.log_tail = _unmirror(supervise.read_tail(spec.log, LOG_TAIL_BYTES), sandbox)
    record.log_bytes = supervise.read_meta(spec.log).get("bytes_total")
    record.message = _unmirror(record.message, sandbox)
    if record.traceback:
        record.traceback = _unmirror(record.traceback, sandbox)
    if stats is not None:
        record.environment.setdefault("sandbox", stats.describe())
    record.environment["confinement"] = confined.describe()
    record.environment["confinement_kind"] = confined.kind
    _merge_guard_log(record, guard_log(spec), sandbox)
    if sandbox_problem:
        record.environment["sandbox_cleanup"] = sandbox_problem
    if timed_out:
        record.status = events.TIMEOUT
        record.message = (f"no result after {spec.timeout:g} s (timeout) with {len(record.steps)} of {spec.steps} "
                          "steps done: the script hangs or is too slow for --timeout")
    elif record.status == events.DIED:
        record.message = (f"the harness process ended with status {process.returncode} before reporting "
                          "(killed, out of memory, or a crash in native code)")
    return record


def _merge_guard_log(record: RunRecord, log: Path, sandbox: Sandbox) -> None:
    """What the guards of every process of the run refused, copied or let through (the harness
    reports only its own process): DataLoader workers and child processes count too."""
    found: dict[str, set[str]] = {key: set(record.guard.get(key, [])) for key in ("blocked", "copied", "outside")}
    try:
        with open(log, "rb") as handle:
            lines = handle.read(LOG_MAX_BYTES).splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            item = json.loads(line)
            found[item["kind"]].add(sandbox.original(item["entry"]) if item["kind"] == "copied" else item["entry"])
        except (ValueError, KeyError, TypeError):
            continue
    record.guard = {key: sorted(values) for key, values in found.items() if values or key in record.guard}


def _unmirror(text: str, sandbox: Sandbox) -> str:
    """Paths in messages and tracebacks name the user's files, not their sandbox mirrors."""
    return text.replace(str(sandbox.fs), "") if text else text


def describe_failure(record: RunRecord) -> str:
    where = f" ({record.location})" if record.location else ""
    return f"{events.STATUS_WORDS.get(record.status, record.status)}: {record.message}{where}"
