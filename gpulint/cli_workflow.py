"""Command-line options for real workflows (config files, stdin, CI gates, --add-noqa).

They live here, not as parameters of every click command, so cli.py needs only a decorator
line per command: the options are collected into `WorkflowOptions` on the click context.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import click

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.engine.files import not_python_reason
from gpulint.engine.findings import Finding
from gpulint.engine.runner import FileReport, Mode, unified_diff
from gpulint.engine.source import SourceError, decode_source, read_source, write_atomic
from gpulint.notebook import is_notebook
from gpulint.output import FORMATS, HUMAN_FORMATS
from gpulint.output.context import RenderContext, display_path, escape_surrogates, printable
from gpulint.output.statistics import render_statistics
from gpulint.output.text import Summary, concise_line

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_KEY = "gpulint.workflow"
STDIN = "-"


@dataclass
class WorkflowOptions:
    config: Optional[Path] = None
    isolated: bool = False
    force_exclude: bool = False
    statistics: bool = False
    show_fixes: bool = False
    exit_non_zero_on_fix: bool = False
    stdin_filename: Optional[str] = None
    add_noqa: bool = False

    @classmethod
    def current(cls) -> "WorkflowOptions":
        ctx = click.get_current_context(silent=True)
        if ctx is None:
            return cls()
        return ctx.meta.setdefault(_KEY, cls())

    def resolver(self, overrides: CliOverrides) -> SettingsResolver:
        """Raises ConfigError (exit 2) for a bad or missing configuration file."""
        if self.config is not None and self.isolated:
            raise click.UsageError("--config and --isolated cannot be used together")
        return SettingsResolver(overrides, config_file=self.config, isolated=self.isolated,
                                force_exclude=self.force_exclude)


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        options = ctx.meta.setdefault(_KEY, WorkflowOptions())
        if value is not None:
            setattr(options, name, value)

    return callback


def _option(*decls: str, name: str, **kwargs: Any) -> Callable:
    return click.option(*decls, expose_value=False, callback=_store(name), **kwargs)


CONFIG_OPTIONS = [
    _option("--config", name="config", type=click.Path(path_type=Path, dir_okay=False),
            help="Use this configuration file for every file (no discovery)."),
    _option("--isolated", name="isolated", is_flag=True, default=None, help="Ignore all configuration files."),
]

LINT_WORKFLOW_OPTIONS = CONFIG_OPTIONS + [
    _option("--force-exclude", name="force_exclude", is_flag=True, default=None,
            help="Apply exclude patterns even to files named on the command line (for pre-commit)."),
    _option("--statistics", name="statistics", is_flag=True, default=None, help="Show the number of findings per code."),
    _option("--show-fixes", name="show_fixes", is_flag=True, default=None,
            help="Show each finding's fix, and after fixing what was fixed."),
    _option("--exit-non-zero-on-fix", name="exit_non_zero_on_fix", is_flag=True, default=None,
            help="Exit 1 when any file was changed by fixes, even if nothing remains."),
    _option("--stdin-filename", name="stdin_filename", metavar="PATH",
            help="With `-`: the name of the file read from stdin (for configuration and output)."),
]

ADD_NOQA_OPTION = _option("--add-noqa", name="add_noqa", is_flag=True, default=None,
                          help="Add `# noqa: CODE` comments for every current finding, then exit 0.")


def workflow_options(func: Callable) -> Callable:
    for option in reversed(LINT_WORKFLOW_OPTIONS):
        func = option(func)
    return func


def config_options(func: Callable) -> Callable:
    for option in reversed(CONFIG_OPTIONS):
        func = option(func)
    return func


# ---------------------------------------------------------------------------------------------
# files

def is_stdin(paths: Sequence[Path], options: Optional[WorkflowOptions] = None) -> bool:
    """`-` among the paths, or `--stdin-filename` without paths, means: lint stdin."""
    if not paths and options is not None and options.stdin_filename:
        return True
    if any(str(p) == STDIN for p in paths):
        if len(paths) > 1:
            raise click.UsageError("`-` (stdin) cannot be combined with other paths")
        return True
    return False


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


def unreadable_directories(walker: Any) -> list[FileReport]:
    """A directory that cannot be read hides its files: a GPU000 finding, not a warning a CI
    gate would pass over."""
    if not walker.errors:
        return []
    from gpulint.engine.runner import syntax_finding

    return [FileReport(path, [syntax_finding(path, f"cannot lint directory: {reason}; its files were not checked")])
            for path, reason in walker.errors]


# ---------------------------------------------------------------------------------------------
# output

def render(findings: Sequence[Finding], output_format: str, ctx: RenderContext, options: WorkflowOptions) -> str:
    """The report as text that always encodes (a file name's undecodable bytes are escaped)."""
    text = _render(findings, output_format, ctx, options)
    return escape_surrogates(text) if output_format in ("json", "json-lines", "sarif") else printable(text)


def _render(findings: Sequence[Finding], output_format: str, ctx: RenderContext, options: WorkflowOptions) -> str:
    if options.statistics:
        return render_statistics(findings, as_json=output_format in ("json", "json-lines"))
    if output_format == "concise" and options.show_fixes:
        out = []
        for finding in findings:
            out.append(concise_line(finding) + "\n")
            if finding.fix is not None:
                out.append(f"    fix ({finding.fix.applicability.value}): {finding.fix.message}\n")
        return "".join(out)
    return FORMATS[output_format](findings, ctx)


def fixed_listing(before: Sequence[Finding], after: Sequence[Finding]) -> str:
    """What fixing removed, per file and code (`--show-fixes` with `fix`)."""
    names = {f.code: f.name for f in before}
    by_file: dict[str, Counter] = {}
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


def exit_code(findings: Sequence[Finding], fixed: int, internal: bool, exit_zero: bool,
              options: WorkflowOptions) -> int:
    if internal:
        return EXIT_ERROR
    if exit_zero:
        return EXIT_CLEAN
    if findings or (options.exit_non_zero_on_fix and fixed):
        return EXIT_FINDINGS
    return EXIT_CLEAN


# ---------------------------------------------------------------------------------------------
# stdin

def _binary(stream: Any) -> Any:
    """The byte stream under a text stream: file bytes pass through undecoded (encoding, BOM)."""
    return getattr(stream, "buffer", stream)


def run_stdin(mode: Mode, resolver: SettingsResolver, output_format: str, unsafe: bool, exit_zero: bool,
              options: WorkflowOptions, verbose: bool = False) -> int:
    """`gpulint check -` / `gpulint fix -`: fixed code goes to stdout, the report to stderr."""
    from gpulint.engine.linter import InternalError, fix_text, lint_text, syntax_finding  # loads LibCST
    if options.add_noqa:
        raise click.UsageError("--add-noqa cannot read from stdin")
    raw = _binary(sys.stdin).read()
    name = options.stdin_filename or STDIN
    settings_path = Path(name)
    stdout = _binary(sys.stdout)
    if options.stdin_filename and resolver.is_excluded(settings_path, explicit=True):
        if mode is Mode.FIX:
            stdout.write(raw)
        return EXIT_CLEAN
    settings = resolver.for_path(settings_path)
    site = resolver.docs_site(settings_path)
    try:
        reason = not_python_reason(name, raw)
        if reason is not None:
            raise SourceError(reason)
        source = decode_source(raw, settings_path)
    except SourceError as exc:
        findings = [syntax_finding(name, f"cannot lint file: {exc}")]
        if mode is Mode.FIX:
            stdout.write(raw)
        click.echo(render(findings, output_format, RenderContext(docs_site=site), options), nl=False,
                   err=mode is Mode.FIX)
        return exit_code(findings, 0, False, exit_zero, options)
    ctx = RenderContext(sources={name: source.text}, docs_site=site)
    fixed = 0
    try:
        if is_notebook(name):
            findings, fixed = _stdin_notebook(mode, name, raw, settings, unsafe, ctx)
        elif mode is Mode.CHECK:
            findings = lint_text(Path(name), source.text, settings).findings
        else:
            before = lint_text(Path(name), source.text, settings).findings if options.show_fixes else []
            outcome = fix_text(Path(name), source.text, settings, unsafe)
            findings, fixed = outcome.findings, outcome.applied
            try:  # the bytes outside the edits are kept exactly, as when writing a file
                data = source.encode_edited(outcome.text, outcome.changes)
            except SourceError as exc:
                click.echo(printable(f"gpulint: warning: {name}: {exc}"), err=True)
                data, fixed = raw, 0
                findings = lint_text(Path(name), source.text, settings).findings
                outcome = replace(outcome, text=source.text)
            if mode is Mode.FIX:
                stdout.write(data)
                stdout.flush()
                ctx.sources[name] = outcome.text
                if options.show_fixes:
                    click.echo(fixed_listing(before, findings), nl=False, err=True)
            else:  # diff
                if outcome.text != source.text:
                    click.echo(unified_diff(name, source.text, outcome.text), nl=False)
                findings = lint_text(Path(name), source.text, settings).findings
    except InternalError as exc:
        if mode is Mode.FIX:
            stdout.write(raw)
        click.echo(printable(f"gpulint: internal error: {exc}"), err=True)
        if verbose:
            click.echo(exc.trace, err=True)
        return EXIT_ERROR
    to_stderr = mode is not Mode.CHECK
    click.echo(render(findings, output_format, ctx, options), nl=False, err=to_stderr)
    if output_format in HUMAN_FORMATS:
        summary = Summary.of(findings, fixed).text(fixing=mode is Mode.FIX, unsafe_enabled=unsafe)
        click.echo(summary, nl=False, err=to_stderr)
    return exit_code(findings, fixed if mode is Mode.FIX else 0, False, exit_zero, options)


def _stdin_notebook(mode: Mode, name: str, raw: bytes, settings: Any, unsafe: bool,
                    ctx: RenderContext) -> tuple[list[Finding], int]:
    """A notebook on stdin: `fix -` prints the fixed notebook, `--diff` the changed cells."""
    from gpulint.notebook.job import run_notebook

    result = run_notebook(Path(name), raw, settings, mode is not Mode.CHECK, unsafe)
    if result.error:
        click.echo(printable(f"gpulint: warning: {name}: {result.error}"), err=True)
    if mode is Mode.CHECK:
        return result.findings, 0
    if mode is Mode.DIFF:
        click.echo(result.diff, nl=False)
        return run_notebook(Path(name), raw, settings, False, unsafe).findings, 0
    data = result.data if result.data is not None else raw
    stdout = _binary(sys.stdout)
    stdout.write(data)
    stdout.flush()
    ctx.sources[name] = data.decode("utf-8", errors="replace")
    return result.findings, result.fixed


# ---------------------------------------------------------------------------------------------
# --add-noqa

def write_noqa(reports: Sequence[FileReport]) -> tuple[int, list[str]]:
    """Add suppressions for every finding in the reports' files; returns (added, problems)."""
    from gpulint.engine.linter import parse  # LibCST is loaded only when needed (a cached run never does)
    from gpulint.engine.suppressions import add_noqa
    added = 0
    problems: list[str] = []
    for report in reports:
        if not report.findings or any(f.code == "GPU000" for f in report.findings):
            continue
        try:
            source = read_source(Path(report.path))
        except SourceError as exc:
            problems.append(f"{report.path}: {exc}")
            continue
        if report.digest is not None and hashlib.sha256(source.raw).hexdigest() != report.digest:
            # the rows of the findings belong to the version that was linted
            problems.append(f"{report.path}: file changed since it was linted, skipped (no comments added)")
            continue
        if is_notebook(report.path):
            added += _noqa_notebook(source, report.findings, problems)
            continue
        new_text, covered = add_noqa(source.text, report.findings)
        if covered < len([f for f in report.findings if f.code != "GPU900"]):
            problems.append(f"{report.path}: {len(report.findings) - covered} finding(s) sit where a comment "
                            "cannot go (inside a string or after a line continuation)")
        if new_text == source.text:
            continue
        try:
            parse(new_text)
            write_atomic(source, new_text)
        except SourceError as exc:
            problems.append(f"{report.path}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - never write code that does not parse
            problems.append(f"{report.path}: adding comments would break the file ({exc}); left unchanged")
            continue
        added += covered
    return added, problems


def _noqa_notebook(source: Any, findings: Sequence[Finding], problems: list[str]) -> int:
    from gpulint.engine.source import write_bytes
    from gpulint.notebook.model import NotebookError
    from gpulint.notebook.noqa import notebook_with_noqa

    try:
        data, covered = notebook_with_noqa(source.raw, findings)
        if data is not None:
            write_bytes(source, data)
    except (NotebookError, SourceError) as exc:
        problems.append(f"{source.path}: {exc}")
        return 0
    if covered < len([f for f in findings if f.code != "GPU900"]):
        problems.append(f"{source.path}: {len(findings) - covered} finding(s) sit where a comment cannot go "
                        "(inside a string or after a line continuation)")
    return covered

