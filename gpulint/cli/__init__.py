"""Command line: the click commands. The work happens in cli/lint.py, engine/, output/ and verify/.

Only click and the options are imported to start: `gpulint --version` and a run answered from
the cache load no rule, no LibCST and no output format they do not print.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NoReturn, Optional

import click

from gpulint import ENV_CACHE_DIR, __version__
from gpulint.cli.options import (
    ADD_NOQA_OPTION,
    DIFF_BASE_OPTION,
    FIX_OPTION,
    LintOptions,
    codes_option,
    config_options,
    lint_options,
)

EXIT_ERROR = 2


def printable(text: str) -> str:
    """output.display's escaping, imported only when an error is printed (it loads file reading)."""
    from gpulint.output.display import printable as escape

    return escape(text)


class _Main(click.Group):
    """Ctrl-C (or SIGTERM, SIGHUP) anywhere in a command: one line and exit 128 + the signal (click's
    own handling says "Aborted!" and exits 1, which a CI gate reads as "findings remain")."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            _interrupted(exc)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpulint")
def main() -> None:
    """Find and fix what leaves your GPU idle in PyTorch training code."""


def _interrupted(exc: KeyboardInterrupt) -> NoReturn:
    """One line, and 128 + the signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    from gpulint.core.signals import describe, exit_status, interrupted_by

    signum = interrupted_by(exc)
    click.echo(f"gpulint: {describe(signum)}", err=True)
    sys.exit(exit_status(signum))


def _lint(**parsed: Any) -> None:
    with _collector_for_one_run():
        from gpulint.cli.lint import lint_command
        from gpulint.core.signals import stopping_on_signals

        with stopping_on_signals():  # `kill PID`, a CI timeout, a closed terminal: stop as Ctrl-C does
            code = lint_command(LintOptions.of(**parsed))
    sys.exit(code)


# The collector's thresholds while `check` or `fix` runs. A cold check builds a few hundred thousand AST
# nodes and facts that live until the run ends: at Python's default (700 allocations a young collection)
# the collector walks them again and again, about 5-10 % of a cold `-j1` check's CPU; every 20,000 costs
# about a third of that, for about 4 MB more peak memory.
RUN_THRESHOLDS = (20_000, 10, 10)


@contextmanager
def _collector_for_one_run() -> Iterator[None]:
    """`RUN_THRESHOLDS` for one lint run, and the thresholds before it back after: a long-lived process
    (`gpulint server`, a test session running the commands in-process) keeps the collector it had."""
    before = gc.get_threshold()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@main.command()
@FIX_OPTION
@ADD_NOQA_OPTION
@DIFF_BASE_OPTION
@lint_options
def check(**parsed: Any) -> None:
    """Report findings in PATHS (default: the current directory)."""
    _lint(**parsed)


@main.command()
@lint_options
def fix(**parsed: Any) -> None:
    """Apply fixes in place (safe ones; unsafe ones too with --unsafe-fixes)."""
    _lint(apply_fix=True, **parsed)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Table of all rules.")
@config_options
def rule(code: Optional[str], show_all: bool, **parsed: Any) -> None:
    """Show a rule's documentation (gpulint rule GPU101), or all rules (--all); it links to the
    rule's page only when `docs-url` (or the package metadata) names a docs site."""
    from gpulint.cli.lint import resolver_for
    from gpulint.core.settings import ConfigError
    from gpulint.output.docs import rule_markdown, rules_table
    from gpulint.rules import (  # LibCST: loaded only where needed
        all_rules,
        rule_by_code,
    )

    if show_all or code is None:
        click.echo(rules_table(all_rules()))
        return
    found = rule_by_code(code)
    if found is None:
        from gpulint.rules import nearest_rule

        near = nearest_rule(code)
        hint = f"; did you mean {near}?" if near else ""
        click.echo(printable(f"gpulint: error: unknown rule {code!r}{hint} (see `gpulint rule --all`)"), err=True)
        sys.exit(EXIT_ERROR)
    try:
        site = resolver_for(LintOptions.of(**parsed)).docs_site(Path("."))
    except ConfigError as exc:
        click.echo(printable(f"gpulint: error: {exc}"), err=True)
        sys.exit(EXIT_ERROR)
    click.echo(rule_markdown(found, site))


@main.command("show-config")
@click.argument("path", type=click.Path(path_type=Path))
@config_options
def show_config(path: Path, **parsed: Any) -> None:
    """Print the settings that apply to PATH and where they come from."""
    from gpulint.cli.lint import resolver_for
    from gpulint.core.settings import ConfigError

    if not os.path.lexists(path):  # a typo must not print some other file's settings with exit 0
        click.echo(printable(f"gpulint: error: {path}: no such file or directory"), err=True)
        sys.exit(EXIT_ERROR)
    try:
        click.echo(resolver_for(LintOptions.of(**parsed)).describe(path), nl=False)
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
              help="cpu runs CUDA scripts on the CPU (CUDA autocast as CPU autocast).")
@click.option("--noise-floor", "noise", type=click.Choice(["auto", "always", "off"]), default="auto",
              show_default=True, help="Rerun the original with its weights nudged by one ulp to measure how far "
              "rounding alone drifts: auto only when a deviation exceeds the rule's own tolerance.")
@click.option("--noise-runs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Perturbed runs of the original behind the noise floor (3 before a FAIL within 3x "
                   "of its allowance).")
@click.option("--float16", type=click.Choice(["auto", "native", "emulate"]), default="auto", show_default=True,
              help="On a CPU, float16 autocast as float16 (native) or as bfloat16 with a float16 range probe "
              "(emulate); auto: native where the CPU has float16 arithmetic.")
@click.option("--blame/--no-blame", default=True, show_default=True,
              help="On FAIL with several rules, rerun with subsets of them to name the rule that causes it.")
@click.option("--nproc-per-node", "nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each version through torchrun with this many processes (DDP/FSDP scripts).")
@codes_option("--select", help="Only these fixes (codes or prefixes); default: all, unsafe included.")
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
def verify(paths: tuple[Path, ...], steps: int, warmup: int, repeats: int, device: str, noise: str,
           noise_runs: int, float16: str, blame: bool, nproc: int, select: Optional[tuple[str, ...]],
           preview: Optional[bool], json_path: Optional[Path], plot_path: Optional[Path],
           min_speedup: Optional[float], timeout: float, threads: Optional[int], workdir: Optional[Path],
           no_diff: bool) -> None:
    """Run each script and its rewrite in sandboxes; compare speed, memory and loss.

    Arguments after -- go to the script.

    Exit codes: 0 PASS (or nothing to rewrite), 1 FAIL, 2 usage or internal error, 3 INCONCLUSIVE
    (the runs do not show the rewrite was tested: no training, a rule NOT EXERCISED, a run cut short).
    """
    from gpulint.verify.results import VerifyOptions
    from gpulint.verify.session import verify_main

    script_args = click.get_current_context().meta.get("gpulint.script_args", ())
    options = VerifyOptions(
        paths=tuple(paths), script_args=script_args, steps=steps, warmup=warmup, device=device, select=select,
        preview=preview, json_path=json_path, plot_path=plot_path, min_speedup=min_speedup, timeout=timeout,
        threads=threads, show_diff=not no_diff, repeats=repeats, nproc=nproc, workdir=workdir,
        noise_runs=0 if noise == "off" else noise_runs, noise="auto" if noise == "off" else noise,
        float16="bfloat16" if float16 == "emulate" else float16, blame=blame,
    )
    sys.exit(verify_main(options))


@main.command("clean")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), envvar=ENV_CACHE_DIR,
              help=f"The cache to remove (default: ./.gpulint_cache; env {ENV_CACHE_DIR}).")
def clean_command(cache_dir: Optional[Path]) -> None:
    """Remove the results cache."""
    from gpulint.engine.cache import CacheError, clean, default_cache_dir

    directory = cache_dir or default_cache_dir()
    try:
        cleaned = clean(directory)
    except CacheError as exc:
        click.echo(f"gpulint: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if cleaned is None:
        click.echo(f"No cache at {directory}.")
    elif cleaned.left:
        noun = "file" if cleaned.left == 1 else "files"
        click.echo(f"Removed gpulint's {cleaned.removed} files from {cleaned.directory}; left {cleaned.left} "
                   f"{noun} gpulint did not write.")
    else:
        click.echo(f"Removed {cleaned.directory}.")


@main.command()
@click.option("--no-cache", is_flag=True, help="Do not read or write the results cache (the project pass's facts).")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), envvar=ENV_CACHE_DIR,
              help=f"Where results are cached (default: .gpulint_cache in each file's project; env {ENV_CACHE_DIR}).")
def server(no_cache: bool, cache_dir: Optional[Path]) -> None:
    """Run the language server on stdin/stdout, for editors."""
    from gpulint.server.start import serve

    serve(cache=not no_cache, cache_dir=cache_dir)


def run() -> None:
    """Entry point that turns unexpected exceptions into exit code 2 with a one-line message."""
    verbose = "-v" in sys.argv or "--verbose" in sys.argv
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    except Exception as exc:  # noqa: BLE001 - last resort: one line and exit 2, never a traceback
        click.echo(printable(f"gpulint: internal error: {type(exc).__name__}: {exc}"), err=True)
        if verbose:
            traceback.print_exc()
        sys.exit(EXIT_ERROR)
