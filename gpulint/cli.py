"""Command line: click commands only; the work happens in engine/, output/ and verify/."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

import click

from gpulint import __version__
from gpulint import cli_workflow as workflow
from gpulint.cli_performance import PerformanceOptions, clean_command, performance_options
from gpulint.config import CliOverrides, ConfigError, parse_codes
from gpulint.engine.files import LINT_SUFFIXES, PathError, Walker
from gpulint.engine.findings import Finding
from gpulint.engine.runner import FileReport, Mode, collect_jobs, run_jobs
from gpulint.output import FORMATS, HUMAN_FORMATS
from gpulint.output.context import RenderContext, printable
from gpulint.output.text import Summary
from gpulint.progress import file_progress

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


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


class _Main(click.Group):
    """Ctrl-C anywhere in a command: one line and exit 130 (click's own handling says
    "Aborted!" and exits 1, which a CI gate reads as "findings remain")."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("gpulint: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpulint")
def main() -> None:
    """Find and fix what leaves your GPU idle in PyTorch training code."""


def _run(mode: Mode, paths: Sequence[Path], select, extend_select, ignore, preview, output_format: str,
         unsafe_fixes: bool, jobs: Optional[int], exit_zero: bool, verbose: bool) -> None:
    options = workflow.WorkflowOptions.current()
    overrides = CliOverrides(select=select, extend_select=extend_select, ignore=ignore, preview=preview)
    walker = Walker(suffixes=LINT_SUFFIXES)
    try:
        resolver = options.resolver(overrides)
        if workflow.is_stdin(paths, options):
            sys.exit(workflow.run_stdin(mode, resolver, output_format, unsafe_fixes, exit_zero, options, verbose))
        found = list(walker.files(paths or [Path(".")]))
        files = workflow.drop_excluded(found, paths or [Path(".")], resolver)
        if not files and not walker.errors:
            sys.exit(workflow.no_files(paths or [Path(".")], found))
        speed = PerformanceOptions.current()
        cache = speed.open_cache()
        projects = speed.scan_projects(files, paths or [Path(".")], cache, jobs)
        jobs_list = collect_jobs(files, resolver.for_path, mode, unsafe_fixes, cache=cache,
                                 profile=speed.profile, projects=projects)
    except (PathError, ConfigError) as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        sys.exit(EXIT_ERROR)
    before: list[Finding] = []
    if mode is Mode.FIX and options.show_fixes:  # what was there before fixing, to list what got fixed
        before = [f for r in run_jobs(collect_jobs(files, resolver.for_path, Mode.CHECK, projects=projects),
                                      workers=jobs) for f in r.findings]
    speed.start()
    with file_progress(len(jobs_list), "Fixing" if mode is Mode.FIX else "Checking") as advance:
        reports = sorted(run_jobs(jobs_list, workers=jobs, advance=advance) + workflow.unreadable_directories(walker),
                         key=lambda r: r.path)
    speed.print_profile(reports, jobs)
    if options.add_noqa:
        sys.exit(_add_noqa(reports, walker, verbose))
    code = _report(reports, walker, mode, output_format, unsafe_fixes, exit_zero, verbose,
                   docs_site=resolver.docs_site(Path(".")))
    if options.show_fixes and mode is Mode.FIX:
        click.echo(workflow.fixed_listing(before, [f for r in reports for f in r.findings]), nl=False, err=True)
    sys.exit(code)


def _add_noqa(reports: list[FileReport], walker: Walker, verbose: bool) -> int:
    code = _report(reports, walker, Mode.CHECK, "concise", False, True, verbose, quiet=True)
    added, problems = workflow.write_noqa(reports)
    for problem in problems:
        click.echo(printable(f"gpulint: warning: {problem}"), err=True)
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
    return code


def _report(reports: list[FileReport], walker: Walker, mode: Mode, output_format: str, unsafe: bool,
            exit_zero: bool, verbose: bool, quiet: bool = False, docs_site: Optional[str] = None) -> int:
    findings: list[Finding] = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed for r in reports)
    internal = [r for r in reports if r.internal_error]
    for report in reports:
        if report.write_error:
            click.echo(printable(f"gpulint: warning: {report.path}: {report.write_error}"), err=True)
    for report in internal:
        message, trace = report.internal_error  # type: ignore[misc]
        click.echo(printable(f"gpulint: internal error: {message}"), err=True)
        if verbose:
            click.echo(trace, err=True)
    if internal and not verbose:
        click.echo("gpulint: run with -v for the traceback; please report this as a bug", err=True)

    human = output_format in HUMAN_FORMATS
    options = workflow.WorkflowOptions.current()
    if mode is Mode.DIFF:
        for report in reports:
            if report.diff:
                click.echo(report.diff, nl=False)
        would = sum(r.fixed for r in reports)
        click.echo(f"Would fix {would} finding{'s' if would != 1 else ''}.", err=True)
        if internal:
            click.echo(Summary(0, 0, 0, errors=len(internal)).text().splitlines()[0], err=True)
    elif not quiet:
        click.echo(workflow.render(findings, output_format, RenderContext(docs_site=docs_site), options), nl=False)
        if human:  # never "All checks passed!" when a file went unchecked
            summary = Summary.of(findings, fixed, errors=len(internal))
            click.echo(summary.text(fixing=mode is Mode.FIX, unsafe_enabled=unsafe), nl=False)
    return workflow.exit_code(findings, fixed if mode is Mode.FIX else 0, bool(internal), exit_zero, options)


@main.command()
@lint_options
@workflow.workflow_options
@workflow.ADD_NOQA_OPTION
@performance_options
@click.option("--fix", "apply_fix", is_flag=True, help="Apply safe fixes (same as `gpulint fix`).")
def check(paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, diff, jobs, exit_zero,
          verbose, apply_fix) -> None:
    """Report findings in PATHS (default: the current directory)."""
    mode = Mode.DIFF if diff else (Mode.FIX if apply_fix else Mode.CHECK)
    _run(mode, paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, jobs, exit_zero, verbose)


@main.command()
@lint_options
@workflow.workflow_options
@performance_options
def fix(paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, diff, jobs, exit_zero,
        verbose) -> None:
    """Apply fixes in place (safe ones; unsafe ones too with --unsafe-fixes)."""
    mode = Mode.DIFF if diff else Mode.FIX
    _run(mode, paths, select, extend_select, ignore, preview, output_format, unsafe_fixes, jobs, exit_zero, verbose)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Table of all rules.")
@workflow.config_options
def rule(code: Optional[str], show_all: bool) -> None:
    """Show a rule's documentation (gpulint rule GPU101), or all rules (--all); it links to the
    rule's page only when `docs-url` (or the package metadata) names a docs site."""
    from gpulint.output.docs import rule_markdown, rules_table
    from gpulint.rules import DOCUMENTED_RULES, rule_by_code  # LibCST: loaded only where needed

    if show_all or code is None:
        click.echo(rules_table(DOCUMENTED_RULES))
        return
    found = rule_by_code(code)
    if found is None:
        click.echo(printable(f"gpulint: error: unknown rule {code!r}; see `gpulint rule --all`"), err=True)
        sys.exit(EXIT_ERROR)
    try:
        site = workflow.WorkflowOptions.current().resolver(CliOverrides()).docs_site(Path("."))
    except ConfigError as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        sys.exit(EXIT_ERROR)
    click.echo(rule_markdown(found, site))


@main.command("show-config")
@click.argument("path", type=click.Path(path_type=Path))
@workflow.config_options
def show_config(path: Path) -> None:
    """Print the settings that apply to PATH and where they come from."""
    if not os.path.lexists(path):  # a typo must not print some other file's settings with exit 0
        click.echo(printable(f"gpulint: error: {path}: no such file or directory"), err=True)
        sys.exit(EXIT_ERROR)
    try:
        resolver = workflow.WorkflowOptions.current().resolver(CliOverrides())
        click.echo(resolver.describe(path), nl=False)
    except ConfigError as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        sys.exit(EXIT_ERROR)


class _ScriptArgsCommand(click.Command):
    """Everything after the first `--` goes to the verified script, not to gpulint."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta["gpulint.script_args"] = args[:cut], tuple(args[cut + 1:])
        return super().parse_args(ctx, args)


@main.command(cls=_ScriptArgsCommand)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--steps", type=click.IntRange(min=1), default=60, show_default=True, help="Training steps per run.")
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True,
              help="Steps left out of the timing (lowered when --steps is too small for it).")
@click.option("--repeats", type=click.IntRange(min=0), default=3, show_default=True,
              help="Timed runs of each version, interleaved; 0: check numerics only.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="cpu runs CUDA scripts on the CPU (autocast as bfloat16).")
@click.option("--nproc-per-node", "nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each version through torchrun with this many processes (DDP/FSDP scripts).")
@click.option("--select", callback=_codes, help="Only these fixes (codes or prefixes); default: all, unsafe included.")
@click.option("--preview/--no-preview", default=None, help="Also apply fixes of preview rules (GPU301).")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False), help="Write the full report.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a PNG of loss curves and step times (needs matplotlib).")
@click.option("--min-speedup", type=click.FloatRange(min=0), default=None,
              help="Fail unless the speedup's 95% confidence interval lies at or above this.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds per run.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads in every run.")
@click.option("--workdir", type=click.Path(path_type=Path, file_okay=False),
              help="Keep the rewritten files, logs and events here (default: a temporary folder, deleted).")
@click.option("--no-diff", is_flag=True, help="Do not print the rewrite's diff.")
def verify(paths, steps, warmup, repeats, device, nproc, select, preview, json_path, plot_path, min_speedup, timeout,
           threads, workdir, no_diff) -> None:
    """Run each script and its rewrite in sandboxes; compare speed, memory and loss. Arguments after -- go to the script.

    Exit codes: 0 PASS (or nothing to rewrite), 1 FAIL, 2 usage or internal error, 3 INCONCLUSIVE
    (the runs do not show the rewrite was tested: no training, a rule NOT EXERCISED, a run cut short).
    """
    from gpulint.verify.session import VerifyOptions, verify_main

    script_args = click.get_current_context().meta.get("gpulint.script_args", ())
    options = VerifyOptions(
        paths=tuple(paths), script_args=script_args, steps=steps, warmup=warmup, device=device, select=select,
        preview=preview, json_path=json_path, plot_path=plot_path, min_speedup=min_speedup, timeout=timeout,
        threads=threads, show_diff=not no_diff, repeats=repeats, nproc=nproc, workdir=workdir,
    )
    sys.exit(verify_main(options))


@main.command()
def server() -> None:
    """Run the language server on stdin/stdout, for editors (needs the `server` extra: pygls)."""
    import importlib.util

    if importlib.util.find_spec("pygls") is None:
        click.echo("gpulint: error: gpulint server needs pygls: pip install 'gpulint[server]'", err=True)
        sys.exit(EXIT_ERROR)
    from gpulint.server.lsp import serve

    serve()


main.add_command(clean_command)


def run() -> None:
    """Entry point that turns unexpected exceptions into exit code 2 with a one-line message."""
    verbose = "-v" in sys.argv or "--verbose" in sys.argv
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("gpulint: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # pragma: no cover - last resort
        click.echo(printable(f"gpulint: internal error: {type(exc).__name__}: {exc}"), err=True)
        if verbose:
            traceback.print_exc()
        sys.exit(EXIT_ERROR)
