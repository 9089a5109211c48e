"""Command line: click commands only; the work happens in engine/, output/ and verify/."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

import click

from gpulint import __version__
from gpulint.config import CliOverrides, ConfigError, SettingsResolver, parse_codes
from gpulint.engine.files import PathError, Walker
from gpulint.engine.findings import Finding
from gpulint.engine.runner import FileReport, Mode, collect_jobs, run_jobs
from gpulint.output import FORMATS
from gpulint.output.text import Summary
from gpulint.rules import ALL_RULES, DOCUMENTED_RULES, rule_by_code

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    try:
        return parse_codes(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def lint_options(func):  # noqa: ANN001, ANN201 - click decorator
    options = [
        click.argument("paths", nargs=-1, type=click.Path(path_type=Path)),
        click.option("--select", callback=_codes, help="Rule codes or prefixes to enable, comma-separated (GPU1,GPU201)."),
        click.option("--extend-select", callback=_codes, help="Codes or prefixes to enable on top of the selection."),
        click.option("--ignore", callback=_codes, help="Codes or prefixes to disable, comma-separated."),
        click.option("--preview/--no-preview", default=None, help="Enable rules that are still in preview."),
        click.option("--output-format", type=click.Choice(sorted(FORMATS)), default="concise", show_default=True),
        click.option("--unsafe-fixes", is_flag=True, help="Also apply (or count) fixes that may change numerics."),
        click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: cores)."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpulint")
def main() -> None:
    """Find and fix what leaves your GPU idle in PyTorch training code."""


def _run(mode: Mode, paths: Sequence[Path], select, extend_select, ignore, preview, output_format: str,
         unsafe_fixes: bool, jobs: Optional[int], exit_zero: bool, verbose: bool) -> None:
    resolver = SettingsResolver(CliOverrides(select=select, extend_select=extend_select, ignore=ignore, preview=preview))
    walker = Walker()
    try:
        files = list(walker.files(paths or [Path(".")]))
    except PathError as exc:
        click.echo(f"gpulint: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    reports = run_jobs(collect_jobs(files, resolver.for_path, mode, unsafe_fixes), workers=jobs)
    sys.exit(_report(reports, walker, mode, output_format, unsafe_fixes, exit_zero, verbose))


def _report(reports: list[FileReport], walker: Walker, mode: Mode, output_format: str, unsafe: bool,
            exit_zero: bool, verbose: bool) -> int:
    findings: list[Finding] = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed for r in reports)
    internal = [r for r in reports if r.internal_error]
    for path, reason in walker.errors:
        click.echo(f"gpulint: warning: cannot read {path}: {reason}", err=True)
    for report in reports:
        if report.write_error:
            click.echo(f"gpulint: warning: {report.path}: {report.write_error}", err=True)
    for report in internal:
        message, trace = report.internal_error  # type: ignore[misc]
        click.echo(f"gpulint: internal error: {message}", err=True)
        if verbose:
            click.echo(trace, err=True)
    if internal and not verbose:
        click.echo("gpulint: run with -v for the traceback; please report this as a bug", err=True)

    human = output_format == "concise"
    if mode is Mode.DIFF:
        for report in reports:
            if report.diff:
                click.echo(report.diff, nl=False)
        would = sum(r.fixed for r in reports)
        click.echo(f"Would fix {would} finding{'s' if would != 1 else ''}.", err=True)
    else:
        click.echo(FORMATS[output_format](findings), nl=False)
        if human:
            click.echo(Summary.of(findings, fixed).text(fixing=mode is Mode.FIX, unsafe_enabled=unsafe), nl=False)
    if internal:
        return EXIT_ERROR
    if findings and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


@main.command()
@lint_options
@click.option("--fix", "apply_fix", is_flag=True, help="Apply safe fixes (same as `gpulint fix`).")
def check(paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, diff, jobs, exit_zero,
          verbose, apply_fix) -> None:
    """Report findings in PATHS (default: the current directory)."""
    mode = Mode.DIFF if diff else (Mode.FIX if apply_fix else Mode.CHECK)
    _run(mode, paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, jobs, exit_zero, verbose)


@main.command()
@lint_options
def fix(paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, diff, jobs, exit_zero,
        verbose) -> None:
    """Apply fixes in place (safe ones; unsafe ones too with --unsafe-fixes)."""
    mode = Mode.DIFF if diff else Mode.FIX
    _run(mode, paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, jobs, exit_zero, verbose)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Table of all rules.")
def rule(code: Optional[str], show_all: bool) -> None:
    """Show a rule's documentation (gpulint rule GPU101), or all rules (--all)."""
    from gpulint.output.docs import rule_markdown, rules_table

    if show_all or code is None:
        click.echo(rules_table(DOCUMENTED_RULES))
        return
    found = rule_by_code(code)
    if found is None:
        click.echo(f"gpulint: error: unknown rule {code!r}; see `gpulint rule --all`", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(rule_markdown(found))


def run() -> None:
    """Entry point that turns unexpected exceptions into exit code 2 with a one-line message."""
    verbose = "-v" in sys.argv or "--verbose" in sys.argv
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("gpulint: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # pragma: no cover - last resort
        click.echo(f"gpulint: internal error: {type(exc).__name__}: {exc}", err=True)
        if verbose:
            traceback.print_exc()
        sys.exit(EXIT_ERROR)
