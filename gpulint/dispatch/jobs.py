"""One file's job: a Python file through the linter, a notebook through the notebook package.

This sits above both (the engine runs jobs without knowing what a notebook is), so no arrow
between the engine and the notebook package points back down. The process pool, the cache and
the job's shape stay in the engine (engine/runner.py); this module says what a job does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional, Sequence

from gpulint.core.findings import Finding
from gpulint.core.source import (
    READ_LIMIT,
    SourceError,
    SourceFile,
    decode_source,
    read_bytes,
    read_source,
    write_bytes,
)
from gpulint.engine import runner
from gpulint.engine.files import not_python_reason
from gpulint.engine.profile import NO_PROFILE, Profile
from gpulint.engine.runner import Advance, FileResult, Job, Mode, interrupted, syntax_finding
from gpulint.notebook import is_notebook


def _linter() -> ModuleType:
    """The linter, imported on first use: a run answered from the cache never loads LibCST."""
    from gpulint.engine import linter

    return linter


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
                                               project=job.project, edits=job.edits).findings
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
        if interrupted():
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
            if interrupted():
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


def _unusable(findings: list[Finding], job: Job) -> bool:
    """A cached result this job cannot use: it has fixes to apply, or it holds fixes predicted without
    edits (a `check` that showed no edits stored it) where this job shows or applies edits."""
    if _needs_fixing(findings, job):
        return True
    return job.edits and any(f.fix is not None and not f.fix.edits for f in findings)


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
    if cached is None or _unusable(cached, job):
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
        if cached is not None and not _unusable(cached, job):
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


def run_jobs(
    jobs: Sequence[Job],
    workers: Optional[int] = None,
    worker: Callable[[Job], FileResult] = run_job,
    advance: Advance = lambda paths, cached: None,
) -> list[FileResult]:
    """Run every job (engine/runner.py); cache hits are answered without a worker when the worker is
    the standard one. The result never depends on the number of workers."""
    answer = cached_result if worker is run_job else None
    return runner.run_jobs(jobs, worker, workers=workers, advance=advance, answer=answer)
