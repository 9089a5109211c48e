"""Run the linter over many files: one process per core for big runs, results in path order."""

from __future__ import annotations

import difflib
import hashlib
import multiprocessing
import multiprocessing.context
import os
import signal
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection, wait
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from gpulint.analysis.project import ProjectView
from gpulint.config import Settings
from gpulint.engine.cache import ResultCache
from gpulint.engine.files import not_python_reason
from gpulint.engine.findings import Finding
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.engine.source import READ_LIMIT, SourceError, SourceFile, read_bytes, read_source, write_bytes
from gpulint.notebook import is_notebook

POOL_THRESHOLD = 8  # below this many files a process pool costs more than it saves


class Mode(str, Enum):
    CHECK = "check"
    DIFF = "diff"  # compute fixes, write nothing
    FIX = "fix"


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed: int = 0
    diff: Optional[str] = None
    fixed_text: Optional[str] = None
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


def unified_diff(path: str, before: str, after: str) -> str:
    from gpulint.output.context import quote_path

    lines = difflib.unified_diff(  # names quoted as git quotes them: a name that is not UTF-8 prints
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=quote_path(f"a/{path.lstrip('/')}"), tofile=quote_path(f"b/{path.lstrip('/')}"),
    )
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _linter():  # noqa: ANN202 - the module
    """The linter, imported on first use: a run answered from the cache never loads LibCST."""
    from gpulint.engine import linter

    return linter


def syntax_finding(path: str, message: str) -> Finding:
    return _linter().syntax_finding(path, message)


def run_source(path: Path, source: SourceFile, job: Job, profile: Profile = NO_PROFILE) -> FileReport:
    if is_notebook(str(path)):
        return _run_notebook(path, source, job, profile)
    report = FileReport(str(path))
    linter = _linter()
    lint_text = linter.lint_text
    try:
        if job.mode is Mode.CHECK:
            report.findings = lint_text(path, source.text, job.settings, profile=profile, project=job.project).findings
            return report
        outcome = linter.fix_text(path, source.text, job.settings, job.unsafe, profile=profile, project=job.project)
    except linter.InternalError as exc:
        report.internal_error = (str(exc), exc.trace)
        return report
    report.findings = outcome.findings
    report.fixed = outcome.applied
    report.cacheable = not outcome.too_large
    if outcome.text != source.text:
        report.fixed_text = outcome.text
        try:
            # the bytes-outside-the-edits invariant is checked here, before anything is written
            # or shown: a fix that would break it is refused in `--diff` exactly as in `fix`
            data = source.encode_edited(outcome.text, outcome.changes)
            if job.mode is Mode.DIFF:
                report.diff = unified_diff(str(path), source.text, outcome.text)
                # in diff mode nothing is written, so the fixed findings still stand
                report.findings = lint_text(path, source.text, job.settings, project=job.project).findings
            elif _interrupted:
                raise SourceError("interrupted; fix not written")
            else:
                with profile.phase("writing"):
                    write_bytes(source, data)
                report.written = data
        except SourceError as exc:
            report.write_error = str(exc)
            report.fixed = 0
            report.fixed_text = None
            report.findings = lint_text(path, source.text, job.settings, project=job.project).findings
    return report


def _run_notebook(path: Path, source: SourceFile, job: Job, profile: Profile) -> FileReport:
    """A notebook: its code cells linted as one program (gpulint/notebook/), written as `run_source` writes."""
    from gpulint.notebook.job import run_notebook

    report = FileReport(str(path))
    linter = _linter()

    def findings_before() -> list[Finding]:
        return run_notebook(path, source.raw, job.settings, False, job.unsafe, job.project).findings

    try:
        result = run_notebook(path, source.raw, job.settings, job.mode is not Mode.CHECK, job.unsafe, job.project,
                              profile)
        report.findings, report.cacheable, report.write_error = result.findings, result.cacheable, result.error
        if result.data is None:
            return report
        if job.mode is Mode.DIFF:  # nothing is written: the findings before fixing still stand
            report.diff, report.fixed, report.findings = result.diff, result.fixed, findings_before()
            return report
        try:
            if _interrupted:
                raise SourceError("interrupted; fix not written")
            with profile.phase("writing"):
                write_bytes(source, result.data)
            report.written, report.fixed = result.data, result.fixed
        except SourceError as exc:
            report.write_error = str(exc)
            report.findings = findings_before()
    except linter.InternalError as exc:
        report.internal_error = (str(exc), exc.trace)
    return report


def run_job(job: Job) -> FileReport:
    profile = Profile() if job.profile else NO_PROFILE
    report = _run_job(job, profile)
    if profile.enabled:
        report.timings = profile.to_dict()
    return report


def _needs_fixing(findings: list[Finding], job: Job) -> bool:
    return job.mode is not Mode.CHECK and any(f.fix is not None and f.fix.is_applicable(job.unsafe) for f in findings)


def cached_report(job: Job) -> Optional[FileReport]:
    """The job's report straight from the cache, or None: no cache, a miss, or fixes to apply."""
    if job.cache is None:
        return None
    profile = Profile() if job.profile else NO_PROFILE
    try:
        with profile.phase("read"):
            # the same guarded read as linting: a FIFO or a device named *.py must not block here
            raw, _ = read_bytes(job.path, max(READ_LIMIT, job.settings.max_file_size))
    except SourceError:
        return None  # the worker reports why
    if not_python_reason(str(job.path), raw) is not None:
        return None
    with profile.phase("cache"):
        cached = job.cache.get(job.cache_key(raw), str(job.path))
    if cached is None or _needs_fixing(cached, job):
        return None
    profile.count("cached")
    return FileReport(str(job.path), cached, timings=profile.to_dict() if profile.enabled else None,
                      digest=_digest(raw))


def _run_job(job: Job, profile: Profile) -> FileReport:
    try:
        with profile.phase("read"):
            source = read_source(job.path, max(READ_LIMIT, job.settings.max_file_size))
    except SourceError as exc:
        return FileReport(str(job.path), [syntax_finding(str(job.path), f"cannot lint file: {exc}")])
    reason = not_python_reason(str(job.path), source.raw)
    if reason is not None:  # never parse a notebook or JSON as Python and call it clean
        return FileReport(str(job.path), [syntax_finding(str(job.path), f"cannot lint file: {reason}")])
    cache, key = job.cache, ""
    if cache is not None:
        with profile.phase("cache"):
            key = job.cache_key(source.raw)
            cached = cache.get(key, str(job.path))
        # a hit answers `check`, and `fix` too when none of its findings has a fix to apply
        if cached is not None and not _needs_fixing(cached, job):
            profile.count("cached")
            return FileReport(str(job.path), cached, digest=_digest(source.raw))
    profile.count("linted")
    try:
        report = run_source(job.path, source, job, profile)
    except RecursionError:
        return FileReport(str(job.path), [syntax_finding(str(job.path), "file is nested too deeply to analyse")])
    except MemoryError:
        return FileReport(str(job.path), [syntax_finding(str(job.path), "file is too large to analyse")])
    report.digest = _digest(report.written if report.written is not None else source.raw)
    if cache is not None and report.internal_error is None and report.cacheable:
        with profile.phase("cache"):
            if report.written is not None:
                # the file now holds the fixed text, and the findings describe it
                key = job.cache_key(report.written)
            cache.put(key, report.findings)
    report.written = None  # not sent back from workers
    return report


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(
    jobs: Sequence[Job],
    workers: Optional[int] = None,
    worker: Callable[[Job], FileReport] = run_job,
    advance: Callable[[int], None] = lambda n: None,
) -> list[FileReport]:
    """Run every job; the result never depends on the number of workers. `advance(n)` is told
    as files are done (a progress bar)."""
    workers = default_jobs() if workers is None else max(1, workers)
    reports: list[FileReport] = []
    misses: list[Job] = []
    for job in jobs:  # cache hits are answered here: no worker process for an unchanged tree
        hit = cached_report(job) if worker is run_job else None
        if hit is None:
            misses.append(job)
        else:
            reports.append(hit)
    advance(len(reports))
    ordered = sorted(misses, key=lambda j: -_size(j.path))  # largest first: no straggler at the end
    workers = min(workers, len(ordered))  # never more processes than files to lint
    if workers <= 1 or len(ordered) < POOL_THRESHOLD:
        for job in ordered:
            reports.append(worker(job))
            advance(1)
    else:
        reports += _run_pool(ordered, workers, worker, advance)
    reports.sort(key=lambda r: r.path)
    for report in reports:
        report.findings.sort(key=lambda f: f.sort_key)
    return reports


def _context() -> multiprocessing.context.BaseContext:
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _run_pool(jobs: Sequence[Job], workers: int, worker: Callable[[Job], FileReport],
              advance: Callable[[int], None] = lambda n: None) -> list[FileReport]:
    """Run jobs in worker processes. A worker that dies (a crash in LibCST's native parser, the
    OOM killer) takes the pool down: the jobs it left unfinished then run again one process
    each, so the file that kills its process is named and every other file still gets linted.
    On Ctrl-C, queued jobs are cancelled and running ones finish without writing.
    """
    _linter()  # load LibCST once here, so forked workers share it
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_worker_started)
    reports: list[FileReport] = []
    unfinished: list[Job] = []
    try:
        futures = [(pool.submit(_pool_task, worker, job), job) for job in jobs]
        for future, job in futures:
            try:
                reports.append(future.result())
            except BrokenProcessPool:
                unfinished.append(job)
            advance(1)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return reports + _run_isolated(unfinished, workers, worker)


_interrupted = False


def _note_interrupt(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True


def _worker_started() -> None:
    """In a worker, Ctrl-C is only noted: the main process stops the run and reports it once,
    and a file being fixed is not written after the user asked to stop."""
    signal.signal(signal.SIGINT, _note_interrupt)


def interrupted() -> bool:
    return _interrupted


def _pool_task(worker: Callable[[Job], FileReport], job: Job) -> FileReport:
    if _interrupted:
        return FileReport(str(job.path), write_error="interrupted; not linted")
    return worker(job)


def _isolated_child(worker: Callable[[Job], FileReport], job: Job, connection: Connection) -> None:
    _worker_started()
    try:
        report = worker(job)
    except BaseException as exc:  # noqa: BLE001 - reported, never raised in a child
        report = FileReport(str(job.path), internal_error=(f"{job.path}: {type(exc).__name__}: {exc}",
                                                            traceback.format_exc()))
    connection.send(report)
    connection.close()


def _run_isolated(jobs: Sequence[Job], workers: int, worker: Callable[[Job], FileReport]) -> list[FileReport]:
    """Each job in a process of its own, `workers` at a time: a process that dies names its file."""
    context = _context()
    pending = list(jobs)
    running: dict[Connection, tuple[multiprocessing.process.BaseProcess, Job]] = {}
    reports: list[FileReport] = []
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_isolated_child, args=(worker, job, writer), daemon=True)
            process.start()
            writer.close()
            running[reader] = (process, job)
        for reader in wait(list(running)):
            process, job = running.pop(reader)  # type: ignore[index]
            try:
                report: Optional[FileReport] = reader.recv()  # type: ignore[union-attr]
            except EOFError:
                report = None
            reader.close()  # type: ignore[union-attr]
            process.join()
            reports.append(report if report is not None else _crashed(job, process.exitcode or 0))
    return reports


def _crashed(job: Job, code: int) -> FileReport:
    how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
        else f"exit status {code}"
    hint = " (out of memory?)" if code == -signal.SIGKILL else ""
    return FileReport(str(job.path), internal_error=(
        f"{job.path}: gpulint crashed while linting this file (its process was {how}{hint}); "
        "the file was not checked", ""))


def collect_jobs(paths: Iterable[Path], settings_for: Callable[[Path], Settings], mode: Mode,
                 unsafe: bool = False, cache: Optional[ResultCache] = None, profile: bool = False,
                 projects: Optional[dict[str, ProjectView]] = None) -> list[Job]:
    views = projects or {}
    return [Job(path, settings_for(path), mode, unsafe, cache, profile, views.get(str(path))) for path in paths]
