"""Run the linter over many files: one process per core for big runs, results in path order."""

from __future__ import annotations

import difflib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from gpulint.config import Settings
from gpulint.engine.findings import Finding
from gpulint.engine.linter import InternalError, fix_text, lint_text, syntax_finding
from gpulint.engine.source import SourceError, SourceFile, read_source, write_atomic

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


@dataclass(frozen=True)
class Job:
    path: Path
    settings: Settings
    mode: Mode
    unsafe: bool = False


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"
    )
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def run_source(path: Path, source: SourceFile, job: Job) -> FileReport:
    report = FileReport(str(path))
    try:
        if job.mode is Mode.CHECK:
            report.findings = lint_text(path, source.text, job.settings).findings
            return report
        outcome = fix_text(path, source.text, job.settings, job.unsafe)
    except InternalError as exc:
        report.internal_error = (str(exc), exc.trace)
        return report
    report.findings = outcome.findings
    report.fixed = outcome.applied
    if outcome.text != source.text:
        report.fixed_text = outcome.text
        if job.mode is Mode.DIFF:
            report.diff = unified_diff(str(path), source.text, outcome.text)
            # in diff mode nothing is written, so the fixed findings still stand
            report.findings = lint_text(path, source.text, job.settings).findings
        else:
            try:
                write_atomic(source, outcome.text)
            except SourceError as exc:
                report.write_error = str(exc)
                report.fixed = 0
                report.findings = lint_text(path, source.text, job.settings).findings
    return report


def run_job(job: Job) -> FileReport:
    try:
        source = read_source(job.path)
    except SourceError as exc:
        return FileReport(str(job.path), [syntax_finding(str(job.path), f"cannot lint file: {exc}")])
    try:
        return run_source(job.path, source, job)
    except RecursionError:
        return FileReport(str(job.path), [syntax_finding(str(job.path), "file is nested too deeply to analyse")])
    except MemoryError:
        return FileReport(str(job.path), [syntax_finding(str(job.path), "file is too large to analyse")])


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
) -> list[FileReport]:
    """Run every job; the result never depends on the number of workers."""
    workers = default_jobs() if workers is None else max(1, workers)
    ordered = sorted(jobs, key=lambda j: -_size(j.path))  # largest first: no straggler at the end
    if workers == 1 or len(ordered) < POOL_THRESHOLD:
        reports = [worker(job) for job in ordered]
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            reports = list(pool.map(worker, ordered, chunksize=1))
    reports.sort(key=lambda r: r.path)
    for report in reports:
        report.findings.sort(key=lambda f: f.sort_key)
    return reports


def collect_jobs(paths: Iterable[Path], settings_for: Callable[[Path], Settings], mode: Mode,
                 unsafe: bool = False) -> list[Job]:
    return [Job(path, settings_for(path), mode, unsafe) for path in paths]
