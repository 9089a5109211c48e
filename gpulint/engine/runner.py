"""Run the linter over many files: one process per core for big runs, results in path order."""

from __future__ import annotations

import contextlib
import os
import signal
import traceback
from dataclasses import field
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from gpulint.records import dataclass

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts: a small or cached run never needs it
    import multiprocessing.process
    from multiprocessing.connection import Connection

from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.core.signals import (
    STOP_SIGNALS,
    die_with_parent,
    exit_status,
    held_while_forking,
    ignored,
    interrupted_by,
    release_held,
)
from gpulint.engine.cache import ResultCache
from gpulint.project.view import ProjectView

POOL_THRESHOLD = 8  # below this many files a process pool costs more than it saves


class Mode(str, Enum):
    CHECK = "check"
    DIFF = "diff"  # compute fixes, write nothing
    FIX = "fix"


@dataclass
class FileResult:
    """What linting (or fixing) one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed: int = 0
    original_text: Optional[str] = None  # `--diff`: the text the fixes apply to
    fixed_text: Optional[str] = None
    # `--diff` of a notebook: (label, source before, source after) per changed code cell
    cell_changes: tuple[tuple[str, str, str], ...] = ()
    data: Optional[bytes] = field(default=None, repr=False)  # `fix`: the bytes to write, checked and encoded
    write_error: Optional[str] = None  # fix computed but not written (read-only, changed, ...)
    internal_error: Optional[tuple[str, str]] = None  # (message, traceback)
    timings: Optional[dict] = None  # Profile.to_dict() with --profile
    # sha256 of the bytes the findings describe: a later writer (--add-noqa) refuses a file that
    # changed since, instead of putting comments on the rows of another version of it
    digest: Optional[str] = None
    written: Optional[bytes] = field(default=None, repr=False)  # the bytes `fix` wrote
    cacheable: bool = True  # False: the findings hold for this mode only (too large to fix)
    unchecked: Optional[str] = None  # why the file was not linted at all (its worker was stopped)


@dataclass(frozen=True)
class Job:
    path: Path
    settings: Settings
    mode: Mode
    unsafe: bool = False
    cache: Optional[ResultCache] = None
    profile: bool = False
    project: Optional[ProjectView] = None  # facts from the rest of the project (dispatch/project_scan.py)
    # whether findings must carry their fixes' edits (fix, --diff, formats that show edits); without,
    # the fixes of rules on `ast` are predictions and LibCST is not parsed for them
    edits: bool = True

    def cache_key(self, raw: bytes) -> str:
        assert self.cache is not None
        extra = self.project.fingerprint() if self.project is not None else ""
        return self.cache.key(self.path, raw, self.settings, extra)


def _linter() -> ModuleType:
    """The linter, imported on first use: a run answered from the cache never loads LibCST."""
    from gpulint.engine import linter

    return linter


def syntax_finding(path: str, message: str) -> Finding:
    return _linter().syntax_finding(path, message)


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# advance(paths, cached): these files are done; `cached` when the cache answered them (no work)
Advance = Callable[[Sequence[Path], bool], None]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(
    jobs: Sequence[Job],
    worker: Callable[[Job], FileResult],
    workers: Optional[int] = None,
    advance: Advance = lambda paths, cached: None,
    answer: Optional[Callable[[Job], Optional[FileResult]]] = None,
) -> list[FileResult]:
    """Run every job with `worker`; the result never depends on the number of workers. `answer(job)`
    answers a job without a worker (a cache hit) or returns None. `advance(paths, cached)` is told as
    files are done (a progress bar)."""
    workers = default_jobs() if workers is None else max(1, workers)
    results: list[FileResult] = []
    misses: list[Job] = []
    answered: list[Path] = []
    for job in jobs:  # cache hits are answered here: no worker process for an unchanged tree
        hit = answer(job) if answer is not None else None
        if hit is None:
            misses.append(job)
        else:
            results.append(hit)
            answered.append(job.path)
    advance(answered, True)
    ordered = sorted(misses, key=lambda j: -_size(j.path))  # largest first: no straggler at the end
    workers = min(workers, len(ordered))  # never more processes than files to lint
    if workers <= 1 or len(ordered) < POOL_THRESHOLD:
        for job in ordered:
            results.append(worker(job))
            advance([job.path], False)
    else:
        results += _run_pool(ordered, workers, worker, advance)
    results.sort(key=lambda r: r.path)
    for result in results:
        result.findings.sort(key=lambda f: f.sort_key)
    return results


def _context() -> Any:  # a fork or spawn context (the stubs give their common base no Process)
    import multiprocessing

    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _run_pool(jobs: Sequence[Job], workers: int, worker: Callable[[Job], FileResult],
              advance: Advance = lambda paths, cached: None) -> list[FileResult]:
    """Run jobs in worker processes. A worker that dies (a crash in LibCST's native parser, the
    OOM killer) takes the pool down: the jobs it left unfinished then run again one process
    each, so the file that kills its process is named and every other file still gets linted.
    On Ctrl-C, queued jobs are cancelled and running ones finish without writing.
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    _linter().all_rules()  # load LibCST and the rules once here, so forked workers share them
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_worker_started)
    results: list[FileResult] = []
    unfinished: list[Job] = []
    try:
        with held_while_forking():  # the first submit forks every worker
            futures = [(pool.submit(_pool_task, worker, job), job) for job in jobs]
        for future, job in futures:
            try:
                results.append(future.result())
            except BrokenProcessPool:
                unfinished.append(job)
            advance([job.path], False)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):  # `kill PID` reaches this process only: tell the workers
            _signal_workers(pool, interrupted_by(exc))
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results + _run_isolated(unfinished, workers, worker)


def _signal_workers(pool: Any, signum: int) -> None:
    for process in list((getattr(pool, "_processes", None) or {}).values()):  # where CPython's executor keeps them
        with contextlib.suppress(OSError, AttributeError):
            os.kill(process.pid, signum)


# In a worker process: a stop signal was received / a file is being linted or written.
_interrupted = False
_busy = False


def interrupted() -> bool:
    """Whether this worker was told to stop: a fix being computed is then not written."""
    return _interrupted


def _note_interrupt(signum: int, frame: object) -> None:
    """A stop signal in a worker. Between files it ends the worker at once (nothing is half
    done); during one, it is only noted: the file is finished without writing its fix, so no
    temporary file is left beside it, and the main process stops the run and says so once."""
    global _interrupted
    _interrupted = True
    if not _busy:
        os._exit(exit_status(signum))


def _worker_started() -> None:
    """SIGINT, SIGTERM and SIGHUP are noted in a worker (unless ignored when gpulint started: then
    they stay ignored, as in the main process), and the worker dies with the main process."""
    for sig in STOP_SIGNALS:
        if not ignored(sig):
            signal.signal(sig, _note_interrupt)
    release_held()
    die_with_parent(signal.SIGTERM)


def _parent_gone() -> bool:
    import multiprocessing

    parent = multiprocessing.parent_process()
    return parent is not None and os.getppid() != parent.pid


def _pool_task(worker: Callable[[Job], FileResult], job: Job) -> FileResult:
    global _busy
    if _interrupted:
        return FileResult(str(job.path), unchecked="not linted: the run was interrupted")
    _busy = True
    try:
        return worker(job)
    finally:
        _busy = False
        if _interrupted and _parent_gone():  # nobody is left to send the result to, or to stop us
            os._exit(exit_status(signal.SIGTERM))


def _isolated_child(worker: Callable[[Job], FileResult], job: Job, connection: Connection) -> None:
    _worker_started()
    try:
        result = _pool_task(worker, job)
    except BaseException as exc:  # noqa: BLE001 - reported, never raised in a child
        result = FileResult(str(job.path), internal_error=(f"{job.path}: {type(exc).__name__}: {exc}",
                                                            traceback.format_exc()))
    connection.send(result)
    connection.close()


def _run_isolated(jobs: Sequence[Job], workers: int, worker: Callable[[Job], FileResult]) -> list[FileResult]:
    """Each job in a process of its own, `workers` at a time: a process that dies names its file."""
    from multiprocessing.connection import Connection, wait

    context = _context()
    pending = list(jobs)
    running: dict[Connection, tuple[multiprocessing.process.BaseProcess, Job]] = {}
    results: list[FileResult] = []
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_isolated_child, args=(worker, job, writer), daemon=True)
            with held_while_forking():
                process.start()
            writer.close()
            running[reader] = (process, job)
        for ready in wait(list(running)):
            reader = ready if isinstance(ready, Connection) else None
            assert reader is not None  # wait() returns the connections it was given
            process, job = running.pop(reader)
            try:
                result: Optional[FileResult] = reader.recv()
            except EOFError:
                result = None
            reader.close()
            process.join()
            results.append(result if result is not None else _crashed(job, process.exitcode or 0))
    return results


def _crashed(job: Job, code: int) -> FileResult:
    how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
        else f"exit status {code}"
    hint = " (out of memory?)" if code == -signal.SIGKILL else ""
    return FileResult(str(job.path), internal_error=(
        f"{job.path}: gpulint crashed while linting this file (its process was {how}{hint}); "
        "the file was not checked", ""))


def collect_jobs(paths: Iterable[Path], settings_for: Callable[[Path], Settings], mode: Mode,
                 unsafe: bool = False, cache: Optional[ResultCache] = None, profile: bool = False,
                 projects: Optional[dict[str, ProjectView]] = None, edits: bool = True) -> list[Job]:
    views = projects or {}
    edits = edits or mode is not Mode.CHECK
    return [Job(path, settings_for(path), mode, unsafe, cache, profile, views.get(str(path)), edits) for path in paths]
