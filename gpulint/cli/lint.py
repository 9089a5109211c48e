"""`gpulint check` and `gpulint fix`: find the files, lint them through the runner, print, exit.

Files and stdin take the same road: settings from the resolver, a `Job`, the runner
(engine/runner.py), then the same printing. The cache is opened before the configuration is
read, so a run answered from it validates its configuration without importing the rules.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import click

from gpulint.cli.options import STDIN, LintOptions
from gpulint.config import CliOverrides, SettingsResolver
from gpulint.core.findings import Finding
from gpulint.core.settings import ConfigError
from gpulint.core.source import SourceError, read_source, write_atomic
from gpulint.dispatch.jobs import run_jobs
from gpulint.engine.cache import ResultCache
from gpulint.engine.changes import Changes, ChangesError, changes_since, keep_changed
from gpulint.engine.files import LINT_SUFFIXES, PathError, Walker
from gpulint.engine.profile import Profile
from gpulint.engine.runner import (
    POOL_THRESHOLD,
    FileResult,
    Job,
    Mode,
    collect_jobs,
    default_jobs,
)
from gpulint.notebook import is_notebook
from gpulint.output import EDIT_FORMATS, HUMAN_FORMATS, renderer
from gpulint.output.display import (
    RenderContext,
    display_path,
    escape_surrogates,
    printable,
)
from gpulint.output.progress import file_progress
from gpulint.output.text import Summary, concise_line
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.rules.gpu900_unused_suppression import UnusedSuppression

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def resolver_for(options: LintOptions) -> SettingsResolver:
    """Raises ConfigError (exit 2) for a bad or missing configuration file."""
    if options.config is not None and options.isolated:
        raise click.UsageError("--config and --isolated cannot be used together")
    overrides = CliOverrides(select=options.select, extend_select=options.extend_select, ignore=options.ignore,
                             preview=options.preview)
    return SettingsResolver(overrides, config_file=options.config, isolated=options.isolated,
                            force_exclude=options.force_exclude)


def mode_of(options: LintOptions) -> Mode:
    return Mode.DIFF if options.diff else (Mode.FIX if options.apply_fix else Mode.CHECK)


def needs_edits(options: LintOptions) -> bool:
    """Whether findings must carry their fixes' edits; a `check` that shows none takes the `ast` rules'
    predicted fixes and never parses LibCST for them."""
    return mode_of(options) is not Mode.CHECK or options.show_fixes or options.output_format in EDIT_FORMATS


def lint_command(options: LintOptions) -> int:
    """The whole run; the exit code. With `-o FILE` what it prints on stdout goes to FILE."""
    if options.output_file is None:
        return _lint_run(options)
    from gpulint.cli.report_file import ReportFileError, stdout_to

    try:
        with stdout_to(options.output_file):
            return _lint_run(options)
    except ReportFileError as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        return EXIT_ERROR


def _lint_run(options: LintOptions) -> int:
    started = time.perf_counter()
    cache = None if options.no_cache else ResultCache.open(options.cache_dir)
    # configuration is validated with the options a previous run of this build saved, if any
    saved_options = cache is not None and cache.use_rule_options()
    try:
        resolver = resolver_for(options)
        if options.reads_stdin:
            return _lint_stdin(options, resolver, cache)
        walker = Walker(suffixes=LINT_SUFFIXES)
        found = list(walker.files(options.targets))
        files = drop_excluded(found, options.targets, resolver)
        if not files and not walker.errors:
            return no_files(options.targets, found)
        changes = _changes(options, files)
        project_started = time.perf_counter()
        projects = _scan_projects(files, options, cache)
        project_seconds = time.perf_counter() - project_started
        mode = mode_of(options)
        linted = files if changes is None else [f for f in files if changes.changed(f)]
        jobs = collect_jobs(linted, resolver.for_path, mode, options.unsafe_fixes, cache=cache,
                            profile=options.profile, projects=projects, edits=needs_edits(options))
    except (PathError, ConfigError, ChangesError) as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        return EXIT_ERROR
    before: list[Finding] = []
    if mode is Mode.FIX and options.show_fixes:  # what was there before fixing, to list what got fixed
        before = [f for r in run_jobs(collect_jobs(files, resolver.for_path, Mode.CHECK, projects=projects),
                                      workers=options.jobs) for f in r.findings]
    linting = time.perf_counter()
    with _heap_frozen(len(jobs)), \
            file_progress([job.path for job in jobs], "Fixing" if mode is Mode.FIX else "Checking") as advance:
        results = sorted(run_jobs(jobs, workers=options.jobs, advance=advance) + unreadable_directories(walker),
                         key=lambda r: r.path)
    if options.profile:
        _print_profile(results, options, linting - started - project_seconds, project_seconds,
                       time.perf_counter() - linting)
    if cache is not None and not saved_options:
        cache.store_rule_options()
    if options.add_noqa:
        return _add_noqa(results, options)
    if changes is not None:
        results, hidden = keep_changed(results, changes)
        files_changed = f"{len(jobs)} changed file{'s' if len(jobs) != 1 else ''}" if jobs else "no file changed"
        click.echo(f"gpulint: --diff-base {changes.describe()}: {files_changed}; {hidden} finding"
                   f"{'s' if hidden != 1 else ''} on their unchanged lines not shown", err=True)
    code = print_results(results, mode, options, docs_site=resolver.docs_site(Path(".")))
    if options.show_fixes and mode is Mode.FIX:
        click.echo(fixed_listing(before, [f for r in results for f in r.findings]), nl=False, err=True)
    return code


def _changes(options: LintOptions, files: Sequence[Path]) -> Optional[Changes]:
    """`--diff-base`: the lines changed since the revision (None without the option; git is asked
    only then)."""
    if options.diff_base is None:
        return None
    if options.apply_fix or options.diff or options.add_noqa:
        raise click.UsageError("--diff-base filters a report: it cannot be combined with --fix, --diff or --add-noqa")
    return changes_since(options.diff_base, files)


FREEZE_FROM = 200  # files to lint; below it the collection before freezing (about 12 ms) is not won back


@contextmanager
def _heap_frozen(files: int) -> Iterator[None]:
    """The project's facts live until the run ends, so the collector need not walk them again while every
    file is linted (9 % of a cold `-j1` run's CPU at 1,000 files, growing with the project). Unfrozen
    after: in-process callers (tests, an editor's server) keep a heap the collector looks after."""
    if files < FREEZE_FROM:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _scan_projects(files: Sequence[Path], options: LintOptions, cache: Optional[ResultCache]) -> dict[str, Any]:
    """The project pass: facts from the files around each linted file (dispatch/project_scan.py)."""
    from gpulint.dispatch.project_scan import scan_projects

    return scan_projects(files, options.targets, cache, workers=options.jobs or default_jobs(), hand_over=True)


def _print_profile(results: Sequence[FileResult], options: LintOptions, setup: float, project: float,
                   wall: float) -> None:
    profile = Profile()
    for result in results:
        if result.timings:
            profile.merge(result.timings)
    workers = 1 if len(results) < POOL_THRESHOLD else (options.jobs or default_jobs())
    click.echo(f"gpulint profile: {setup:.3f} s finding files and configuration, {project:.3f} s project pass",
               err=True)
    click.echo(profile.render(wall, workers), nl=False, err=True)


# ---------------------------------------------------------------------------------------------
# files

def drop_excluded(files: Sequence[Path], paths: Sequence[Path], resolver: SettingsResolver) -> list[Path]:
    """Files minus what configuration excludes; files named on the command line stay unless
    force-exclude is on."""
    explicit = {os.path.abspath(p) for p in paths if not p.is_dir()}
    # a directory named on the command line that is itself excluded was asked for: lint it
    asked = [os.path.abspath(p) + os.sep for p in paths if p.is_dir() and resolver.is_excluded(p)]
    kept = []
    for path in files:
        absolute = os.path.abspath(path)
        if absolute in explicit or any(absolute.startswith(d) for d in asked):
            if resolver.is_excluded(path, explicit=True):
                continue
        elif resolver.is_excluded(path):
            continue
        kept.append(path)
    return kept


def no_files(paths: Sequence[Path], found: Sequence[Path]) -> int:
    """Nothing to lint. A mistyped CI path must fail (exit 2), not pass. The one exception is
    pre-commit's: files named one by one that `force-exclude` dropped are a deliberate skip."""
    explicit_files = all(not p.is_dir() for p in paths)
    if found and explicit_files:
        noun = "file" if len(found) == 1 else "files"
        click.echo(f"gpulint: nothing to lint: the {len(found)} {noun} named are excluded by configuration "
                   "(force-exclude)", err=True)
        return EXIT_CLEAN
    where = ", ".join(display_path(str(p)) for p in paths)
    why = "every Python file there is excluded by configuration" if found else "no Python files found"
    click.echo(printable(f"gpulint: error: {why} in {where} (nothing was checked)"), err=True)
    return EXIT_ERROR


def unreadable_directories(walker: Walker) -> list[FileResult]:
    """A directory that cannot be read hides its files: a GPU000 finding, not a warning a CI
    gate would pass over."""
    if not walker.errors:
        return []
    from gpulint.engine.runner import syntax_finding

    return [FileResult(path, [syntax_finding(path, f"cannot lint directory: {reason}; its files were not checked")])
            for path, reason in walker.errors]


# ---------------------------------------------------------------------------------------------
# printing

def print_results(results: Sequence[FileResult], mode: Mode, options: LintOptions, quiet: bool = False,
                  ctx: Optional[RenderContext] = None, docs_site: Optional[str] = None) -> int:
    """Warnings, internal errors, then the report (or the diff) and the summary; the exit code.

    For stdin (`ctx` given) the report goes to stderr when the fixed code goes to stdout. Rules link
    to `docs_site` (None: no links; core/docs_url.py)."""
    findings: list[Finding] = [f for r in results for f in r.findings]
    fixed = sum(r.fixed for r in results)
    internal = [r for r in results if r.internal_error]
    unchecked = [r for r in results if r.unchecked]  # a file not linted never passes: exit 2
    for result in results:
        if result.write_error:
            click.echo(printable(f"gpulint: warning: {result.path}: {result.write_error}"), err=True)
    for result in unchecked:
        click.echo(printable(f"gpulint: error: {result.path}: {result.unchecked}"), err=True)
    for result in internal:
        message, trace = result.internal_error  # type: ignore[misc]
        click.echo(printable(f"gpulint: internal error: {message}"), err=True)
        if options.verbose and trace:
            click.echo(trace, err=True)
    if internal and not options.verbose and ctx is None:
        click.echo("gpulint: run with -v for the traceback; please report this as a bug", err=True)
    to_stderr = ctx is not None and mode is not Mode.CHECK
    if mode is Mode.DIFF:
        from gpulint.output.diff import unified_diff

        for result in results:
            for label, before, after in result.cell_changes:  # a notebook: its changed cells
                click.echo(unified_diff(label, before, after), nl=False)
            if result.original_text is not None and result.fixed_text is not None:
                click.echo(unified_diff(result.path, result.original_text, result.fixed_text), nl=False)
        if any(r.cell_changes or (r.original_text is not None and r.fixed_text is not None) for r in results) \
                and ctx is None:
            click.echo("")  # as ruff: a blank line ends the last hunk before the summary
    if mode is Mode.DIFF and ctx is None:
        would = sum(r.fixed for r in results)
        click.echo(f"Would fix {would} finding{'s' if would != 1 else ''}.", err=True)
        if internal or unchecked:
            click.echo(Summary(0, 0, 0, errors=len(internal) + len(unchecked)).text().splitlines()[0], err=True)
    elif not quiet:
        click.echo(render(findings, options, ctx or RenderContext(docs_site=docs_site)), nl=False, err=to_stderr)
        if options.output_format in HUMAN_FORMATS:  # never "All checks passed!" when a file went unchecked
            errors = len(internal) + len(unchecked) if ctx is None else 0
            summary = Summary.of(findings, fixed, errors=errors)
            click.echo(summary.text(fixing=mode is Mode.FIX, unsafe_enabled=options.unsafe_fixes), nl=False,
                       err=to_stderr)
    return exit_code(findings, fixed if mode is Mode.FIX else 0, bool(internal or unchecked), options)


def render(findings: Sequence[Finding], options: LintOptions, ctx: RenderContext) -> str:
    """The report as text that always encodes (a file name's undecodable bytes are escaped)."""
    text = _render(findings, options, ctx)
    json_text = options.output_format in ("json", "json-lines", "sarif", "gitlab")
    return escape_surrogates(text) if json_text else printable(text)


def _render(findings: Sequence[Finding], options: LintOptions, ctx: RenderContext) -> str:
    if options.statistics:
        from gpulint.output.statistics import render_statistics

        return render_statistics(findings, as_json=options.output_format in ("json", "json-lines"),
                                 unsafe=options.unsafe_fixes)
    ctx = replace(ctx, unsafe_fixes=options.unsafe_fixes)
    if options.output_format == "concise" and options.show_fixes:
        out = []
        for finding in findings:
            out.append(concise_line(finding, options.unsafe_fixes) + "\n")
            if finding.fix is not None:
                out.append(f"    fix ({finding.fix.applicability.value}): {finding.fix.message}\n")
            if finding.note:
                out.append(f"    note: {finding.note}\n")
        return "".join(out)
    return renderer(options.output_format)(findings, ctx)


def fixed_listing(before: Sequence[Finding], after: Sequence[Finding]) -> str:
    """What fixing removed, per file and code (`--show-fixes` with `fix`)."""
    names = {f.code: f.name for f in before}
    by_file: dict[str, Counter[str]] = {}
    for path in sorted({f.path for f in before}):
        gone = Counter(f.code for f in before if f.path == path) - Counter(f.code for f in after if f.path == path)
        if gone:
            by_file[path] = gone
    if not by_file:
        return ""
    total = sum(sum(c.values()) for c in by_file.values())
    lines = [f"Fixed {total} finding{'s' if total != 1 else ''}:"]
    for path, counts in by_file.items():
        lines.append(f"- {display_path(path)}:")
        lines.extend(f"    {n} × {code} ({names[code]})" for code, n in sorted(counts.items()))
    return "\n".join(lines) + "\n"


def exit_code(findings: Sequence[Finding], fixed: int, internal: bool, options: LintOptions) -> int:
    if internal:
        return EXIT_ERROR
    if options.exit_zero:
        return EXIT_CLEAN
    if findings or (options.exit_non_zero_on_fix and fixed):
        return EXIT_FINDINGS
    return EXIT_CLEAN


# ---------------------------------------------------------------------------------------------
# stdin

def _binary(stream: Any) -> Any:
    """The byte stream under a text stream: file bytes pass through undecoded (encoding, BOM)."""
    return getattr(stream, "buffer", stream)


def _lint_stdin(options: LintOptions, resolver: SettingsResolver, cache: Optional[ResultCache]) -> int:
    """`gpulint check -` / `gpulint fix -`: fixed code goes to stdout, the report to stderr."""
    from gpulint.dispatch.jobs import run_stdin

    if options.add_noqa:
        raise click.UsageError("--add-noqa cannot read from stdin")
    if options.diff_base is not None:
        raise click.UsageError("--diff-base compares files with a git revision: it cannot read from stdin")
    name = options.stdin_filename or STDIN
    mode = mode_of(options)
    stdin, stdout = _binary(sys.stdin), _binary(sys.stdout)
    settings = resolver.for_path(Path(name))
    # never more than `max-file-size` in memory: a larger input is a finding (and `fix -` passes it on)
    raw, whole = read_bounded(stdin, settings.max_file_size)
    if options.stdin_filename and resolver.is_excluded(Path(name), explicit=True):
        if mode is Mode.FIX:
            pass_through(raw, stdin, stdout, whole)
        return EXIT_CLEAN
    if not whole:
        return _stdin_too_large(name, raw, settings.max_file_size, mode, options)
    before: list[Finding] = []
    if mode is Mode.FIX and options.show_fixes:
        before = run_stdin(name, raw, Job(Path(name), settings, Mode.CHECK)).findings
    result = run_stdin(name, raw, Job(Path(name), settings, mode, options.unsafe_fixes, edits=needs_edits(options)))
    if mode is Mode.FIX:
        stdout.write(result.data if result.data is not None else raw)
        stdout.flush()
    ctx = RenderContext(docs_site=resolver.docs_site(Path(name)))
    text = result.fixed_text if mode is Mode.FIX and result.fixed_text is not None else result.original_text
    if text is None and not result.internal_error:
        try:
            from gpulint.core.source import decode_source

            text = decode_source(raw, Path(name)).text
        except SourceError:
            text = None
    if text is not None:
        ctx.sources[name] = text
    if result.internal_error:
        message, trace = result.internal_error
        click.echo(printable(f"gpulint: internal error: {message}"), err=True)
        if options.verbose:
            click.echo(trace, err=True)
        return EXIT_ERROR
    code = print_results([result], mode, options, ctx=ctx)
    if options.show_fixes and mode is Mode.FIX:
        click.echo(fixed_listing(before, result.findings), nl=False, err=True)
    return code


STDIN_CHUNK = 1 << 20


def read_bounded(stream: Any, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of `stream`, and whether that was all of it (one byte more is read to know)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(STDIN_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def pass_through(head: bytes, stream: Any, out: Any, whole: bool) -> None:
    """`fix -` on input it does not fix: write it out unchanged, the part not read yet in chunks."""
    out.write(head)
    while not whole:
        chunk = stream.read(STDIN_CHUNK)
        whole = not chunk
        out.write(chunk)
    out.flush()


def _stdin_too_large(name: str, head: bytes, limit: int, mode: Mode, options: LintOptions) -> int:
    from gpulint.core.options import format_size
    from gpulint.engine.runner import syntax_finding

    if mode is Mode.FIX:
        pass_through(head, _binary(sys.stdin), _binary(sys.stdout), False)
    finding = syntax_finding(name, f"file is too large to analyse (stdin holds more than {format_size(limit)}; "
                                   f"max-file-size is {format_size(limit)})")
    return print_results([FileResult(name, [finding])], mode, options, ctx=RenderContext())


# ---------------------------------------------------------------------------------------------
# --add-noqa

def _add_noqa(results: Sequence[FileResult], options: LintOptions) -> int:
    code = print_results(results, Mode.CHECK, options, quiet=True)
    added, problems = write_noqa(results)
    for problem in problems:
        click.echo(printable(f"gpulint: warning: {problem}"), err=True)
    # a GPU000 finding cannot be suppressed: its file still fails `check`, and this run names it
    invalid = [(r.path, f) for r in results for f in r.findings if f.code == InvalidFile.code]
    for path, finding in invalid:
        where = f"{display_path(path)}:cell {finding.cell.number}" if finding.cell is not None else display_path(path)
        rest = ("the notebook's other cells got theirs" if finding.cell is not None
                else "skipped, no noqa directive added")
        click.echo(printable(f"gpulint: warning: {where}: GPU000 {finding.message}; {rest}"), err=True)
    files = len({path for path, _ in invalid})
    skipped = f"; {files} file{'s' if files != 1 else ''} with GPU000 findings no directive can cover" if files else ""
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}{skipped}.")
    if code == EXIT_ERROR:
        return EXIT_ERROR
    return EXIT_FINDINGS if invalid and not options.exit_zero else EXIT_CLEAN


def write_noqa(results: Sequence[FileResult]) -> tuple[int, list[str]]:
    """Add suppressions for every finding in the results' files; returns (added, problems).

    A file gpulint could not parse gets none (its GPU000 finding is all it has); a notebook with
    a cell that does not parse gets them in its other cells."""
    from gpulint.engine.linter import (
        parse,  # LibCST is loaded only when needed (a cached run never does)
    )
    from gpulint.engine.suppressions import add_noqa

    added = 0
    problems: list[str] = []
    for result in results:
        suppressible = [f for f in result.findings if f.code != InvalidFile.code]
        whole_file_invalid = any(f.code == InvalidFile.code and f.cell is None for f in result.findings)
        if not suppressible or whole_file_invalid:
            continue
        try:
            source = read_source(Path(result.path))
        except SourceError as exc:
            problems.append(f"{result.path}: {exc}")
            continue
        if result.digest is not None and hashlib.sha256(source.raw).hexdigest() != result.digest:
            # the rows of the findings belong to the version that was linted
            problems.append(f"{result.path}: file changed since it was linted, skipped (no comments added)")
            continue
        if is_notebook(result.path):
            added += _noqa_notebook(source, suppressible, problems)
            continue
        new_text, covered = add_noqa(source.text, suppressible)
        if covered < len([f for f in suppressible if f.code != UnusedSuppression.code]):
            problems.append(f"{result.path}: {len(suppressible) - covered} finding(s) sit where a comment "
                            "cannot go (inside a string or after a line continuation)")
        if new_text == source.text:
            continue
        try:
            parse(new_text)
            write_atomic(source, new_text)
        except SourceError as exc:
            problems.append(f"{result.path}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - never write code that does not parse
            problems.append(f"{result.path}: adding comments would break the file ({exc}); left unchanged")
            continue
        added += covered
    return added, problems


def _noqa_notebook(source: Any, findings: Sequence[Finding], problems: list[str]) -> int:
    """`--add-noqa` in a notebook: the comments go into its cells, the JSON around them kept byte for byte."""
    from gpulint.core.source import write_bytes
    from gpulint.notebook.model import NotebookError
    from gpulint.notebook.noqa import notebook_with_noqa

    try:
        data, covered = notebook_with_noqa(source.raw, findings)
        if data is not None:
            write_bytes(source, data)
    except (NotebookError, SourceError) as exc:
        problems.append(f"{source.path}: {exc}")
        return 0
    if covered < len([f for f in findings if f.code != UnusedSuppression.code]):
        problems.append(f"{source.path}: {len(findings) - covered} finding(s) sit where a comment cannot go "
                        "(inside a string or after a line continuation)")
    return covered
