"""Run the linter over many files: one process per core for big runs, results in path order."""

from __future__ import annotations

import hashlib
import os
import signal
import traceback
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts: a small or cached run never needs it
    import multiprocessing.process
    from multiprocessing.connection import Connection

from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.core.source import (
    READ_LIMIT,
    SourceError,
    SourceFile,
    decode_source,
    read_bytes,
    read_source,
    write_bytes,
)
from gpulint.engine.cache import ResultCache
from gpulint.engine.files import not_python_reason
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.notebook import is_notebook
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


@dataclass(frozen=True)
class Job:
    path: Path
    settings: Settings
    mode: Mode
    unsafe: bool = False
    cache: Optional[ResultCache] = None
    profile: bool = False
    project: Optional[ProjectView] = None  # facts from the rest of the project (engine/project_scan.py)

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


def run_source(path: Path, source: SourceFile, job: Job, profile: Profile = NO_PROFILE) -> FileResult:
    """Lint or fix one file's text. Nothing is written here: in `fix` mode `result.data` holds the
    bytes to write (the caller writes them to the file, or to stdout for `fix -`)."""
    if is_notebook(str(path)):
        return _run_notebook(path, source, job, profile)
    result = FileResult(str(path))
    linter = _linter()
    try:
        if job.mode is Mode.CHECK:
            result.findings = linter.lint_text(path, source.text, job.settings, profile=profile,
                                               project=job.project).findings
            return result
        outcome = linter.fix_text(path, source.text, job.settings, job.unsafe, profile=profile, project=job.project)
    except linter.InternalError as exc:
        result.internal_error = (str(exc), exc.trace)
        return result
    result.findings = outcome.findings
    result.fixed = outcome.applied
    result.cacheable = not outcome.too_large
    if outcome.text == source.text:
        return result
    try:
        # the bytes-outside-the-edits invariant is checked here, before anything is written
        # or shown: a fix that would break it is refused in `--diff` exactly as in `fix`
        data = source.encode_edited(outcome.text, outcome.changes)
    except SourceError as exc:
        return not_fixed(result, str(exc), path, source, job)
    result.fixed_text = outcome.text
    if job.mode is Mode.DIFF:
        result.original_text = source.text
        # in diff mode nothing is written, so the fixed findings still stand
        result.findings = linter.lint_text(path, source.text, job.settings, project=job.project).findings
    else:
        result.data = data
    return result


def not_fixed(result: FileResult, reason: str, path: Path, source: SourceFile, job: Job) -> FileResult:
    """The fix was computed but cannot be written (or shown): the file keeps its findings."""
    result.write_error = reason
    result.fixed = 0
    result.fixed_text = None
    result.data = None
    result.findings = _linter().lint_text(path, source.text, job.settings, project=job.project).findings
    return result


def _write(result: FileResult, path: Path, source: SourceFile, job: Job, profile: Profile) -> FileResult:
    assert result.data is not None
    try:
        if _interrupted:
            raise SourceError("interrupted; fix not written")
        with profile.phase("writing"):
            write_bytes(source, result.data)
    except SourceError as exc:
        return not_fixed(result, str(exc), path, source, job)
    result.written = result.data
    return result


def _run_notebook(path: Path, source: SourceFile, job: Job, profile: Profile) -> FileResult:
    """A notebook: its code cells linted as one program (gpulint/notebook/), written as `run_source` writes."""
    from gpulint.notebook.job import run_notebook

    result = FileResult(str(path))
    linter = _linter()

    def findings_before() -> list[Finding]:
        return run_notebook(path, source.raw, job.settings, False, job.unsafe, job.project).findings

    try:
        outcome = run_notebook(path, source.raw, job.settings, job.mode is not Mode.CHECK, job.unsafe, job.project,
                               profile)
        result.findings, result.cacheable, result.write_error = outcome.findings, outcome.cacheable, outcome.error
        if outcome.data is None:
            return result
        if job.mode is Mode.DIFF:  # nothing is written: the findings before fixing still stand
            result.cell_changes, result.fixed, result.findings = outcome.changes, outcome.fixed, findings_before()
            return result
        try:
            if _interrupted:
                raise SourceError("interrupted; fix not written")
            with profile.phase("writing"):
                write_bytes(source, outcome.data)
            result.written, result.fixed = outcome.data, outcome.fixed
        except SourceError as exc:
            result.write_error = str(exc)
            result.findings = findings_before()
    except linter.InternalError as exc:
        result.internal_error = (str(exc), exc.trace)
    return result


def run_job(job: Job) -> FileResult:
    profile = Profile() if job.profile else NO_PROFILE
    result = _run_job(job, profile)
    if profile.enabled:
        result.timings = profile.to_dict()
    return result


def _needs_fixing(findings: list[Finding], job: Job) -> bool:
    return job.mode is not Mode.CHECK and any(f.fix is not None and f.fix.is_applicable(job.unsafe) for f in findings)


def cached_result(job: Job) -> Optional[FileResult]:
    """The job's result straight from the cache, or None: no cache, a miss, or fixes to apply."""
    if job.cache is None:
        return None
    profile = Profile() if job.profile else NO_PROFILE
    try:
        with profile.phase("read"):
            # the same guarded read as linting: a FIFO or a device named *.py must not block here
            raw, _ = read_bytes(job.path, max(READ_LIMIT, job.settings.max_file_size))
    except SourceError:
        return None  # the worker says why
    if not_python_reason(str(job.path), raw) is not None:
        return None
    with profile.phase("cache"):
        cached = job.cache.get(job.cache_key(raw), str(job.path))
    if cached is None or _needs_fixing(cached, job):
        return None
    profile.count("cached")
    return FileResult(str(job.path), cached, timings=profile.to_dict() if profile.enabled else None,
                      digest=_digest(raw))


def _run_job(job: Job, profile: Profile) -> FileResult:
    try:
        with profile.phase("read"):
            source = read_source(job.path, max(READ_LIMIT, job.settings.max_file_size))
    except SourceError as exc:
        return FileResult(str(job.path), [syntax_finding(str(job.path), f"cannot lint file: {exc}")])
    reason = not_python_reason(str(job.path), source.raw)
    if reason is not None:  # never parse a notebook or JSON as Python and call it clean
        return FileResult(str(job.path), [syntax_finding(str(job.path), f"cannot lint file: {reason}")])
    cache, key = job.cache, ""
    if cache is not None:
        with profile.phase("cache"):
            key = job.cache_key(source.raw)
            cached = cache.get(key, str(job.path))
        # a hit answers `check`, and `fix` too when none of its findings has a fix to apply
        if cached is not None and not _needs_fixing(cached, job):
            profile.count("cached")
            return FileResult(str(job.path), cached, digest=_digest(source.raw))
    profile.count("linted")
    result = _guarded(job.path, source, job, profile)
    if result.data is not None:
        result = _write(result, job.path, source, job, profile)
    result.digest = _digest(result.written if result.written is not None else source.raw)
    if cache is not None and result.internal_error is None and result.cacheable:
        with profile.phase("cache"):
            if result.written is not None:
                # the file now holds the fixed text, and the findings describe it
                key = job.cache_key(result.written)
            cache.put(key, result.findings)
    result.written = result.data = None  # not sent back from workers
    return result


def _guarded(path: Path, source: SourceFile, job: Job, profile: Profile = NO_PROFILE) -> FileResult:
    """`run_source`, with code too deep or too large for the analysis reported as GPU000."""
    try:
        return run_source(path, source, job, profile)
    except RecursionError:
        return FileResult(str(path), [syntax_finding(str(path), "file is nested too deeply to analyse")])
    except MemoryError:
        return FileResult(str(path), [syntax_finding(str(path), "file is too large to analyse")])


def run_stdin(name: str, raw: bytes, job: Job) -> FileResult:
    """`gpulint check -` / `fix -`: the bytes on stdin, linted as the file `name` would be. Nothing is
    written: in `fix` mode `result.data` holds the fixed bytes (None: print the input unchanged)."""
    path = Path(name)
    try:
        reason = not_python_reason(name, raw)
        if reason is not None:  # never parse a notebook or JSON as Python and call it clean
            raise SourceError(reason)
        if is_notebook(name):
            return _stdin_notebook(path, raw, job)
        source = decode_source(raw, path)
    except SourceError as exc:
        return FileResult(name, [syntax_finding(name, f"cannot lint file: {exc}")])
    return _guarded(path, source, job)


def _stdin_notebook(path: Path, raw: bytes, job: Job) -> FileResult:
    """A notebook on stdin: `fix -` gets the fixed notebook's bytes in `data`, `--diff` its changed cells."""
    from gpulint.notebook.job import run_notebook

    linter = _linter()
    result = FileResult(str(path))
    try:
        outcome = run_notebook(path, raw, job.settings, job.mode is not Mode.CHECK, job.unsafe)
        result.findings, result.write_error = outcome.findings, outcome.error
        if job.mode is Mode.DIFF:  # nothing is written: the findings before fixing still stand
            result.cell_changes, result.fixed = outcome.changes, outcome.fixed
            result.findings = run_notebook(path, raw, job.settings, False, job.unsafe).findings
        elif job.mode is Mode.FIX and outcome.data is not None:
            result.data, result.fixed = outcome.data, outcome.fixed
            result.fixed_text = outcome.data.decode("utf-8", errors="replace")  # what the report quotes
    except linter.InternalError as exc:
        result.internal_error = (str(exc), exc.trace)
    return result


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


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
    workers: Optional[int] = None,
    worker: Callable[[Job], FileResult] = run_job,
    advance: Advance = lambda paths, cached: None,
) -> list[FileResult]:
    """Run every job; the result never depends on the number of workers. `advance(paths, cached)`
    is told as files are done (a progress bar)."""
    workers = default_jobs() if workers is None else max(1, workers)
    results: list[FileResult] = []
    misses: list[Job] = []
    answered: list[Path] = []
    for job in jobs:  # cache hits are answered here: no worker process for an unchanged tree
        hit = cached_result(job) if worker is run_job else None
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
        futures = [(pool.submit(_pool_task, worker, job), job) for job in jobs]
        for future, job in futures:
            try:
                results.append(future.result())
            except BrokenProcessPool:
                unfinished.append(job)
            advance([job.path], False)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results + _run_isolated(unfinished, workers, worker)


_interrupted = False


def _note_interrupt(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True


def _worker_started() -> None:
    """In a worker, Ctrl-C is only noted: the main process stops the run and says so once,
    and a file being fixed is not written after the user asked to stop."""
    signal.signal(signal.SIGINT, _note_interrupt)


def _pool_task(worker: Callable[[Job], FileResult], job: Job) -> FileResult:
    if _interrupted:
        return FileResult(str(job.path), write_error="interrupted; not linted")
    return worker(job)


def _isolated_child(worker: Callable[[Job], FileResult], job: Job, connection: Connection) -> None:
    _worker_started()
    try:
        result = worker(job)
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
                 projects: Optional[dict[str, ProjectView]] = None) -> list[Job]:
    views = projects or {}
    return [Job(path, settings_for(path), mode, unsafe, cache, profile, views.get(str(path))) for path in paths]
