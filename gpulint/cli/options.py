"""The options of `gpulint check` and `gpulint fix`, gathered in one object.

Each click option is declared once here; the commands pass what click parsed to
`LintOptions`, and everything after that reads the object.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import click

from gpulint import ENV_CACHE_DIR
from gpulint.output import FORMATS
from gpulint.records import dataclass

STDIN = "-"
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class LintOptions:
    paths: tuple[Path, ...] = ()
    # which rules run (a layer on top of the configuration's)
    select: Optional[tuple[str, ...]] = None
    extend_select: Optional[tuple[str, ...]] = None
    ignore: Optional[tuple[str, ...]] = None
    preview: Optional[bool] = None
    # configuration files
    config: Optional[Path] = None
    isolated: bool = False
    force_exclude: bool = False
    # what to do
    apply_fix: bool = False  # `check --fix`, and `gpulint fix`
    diff: bool = False
    unsafe_fixes: bool = False
    add_noqa: bool = False
    stdin_filename: Optional[str] = None
    # what to print, and how to exit
    output_format: str = "concise"
    output_file: Optional[Path] = None  # -o: what stdout would get goes to this file
    diff_base: Optional[str] = None  # `check --diff-base REV`: only findings on lines changed since REV
    statistics: bool = False
    show_fixes: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    verbose: bool = False
    # speed
    jobs: Optional[int] = None
    no_cache: bool = False
    cache_dir: Optional[Path] = None
    profile: bool = False

    @classmethod
    def of(cls, **parsed: Any) -> "LintOptions":
        """The options click parsed (None for a flag not given means its default)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in parsed.items() if k in known and v is not None})

    @property
    def reads_stdin(self) -> bool:
        """`-` among the paths, or `--stdin-filename` without paths, means: lint stdin."""
        if not self.paths and self.stdin_filename:
            return True
        if any(str(p) == STDIN for p in self.paths):
            if len(self.paths) > 1:
                raise click.UsageError("`-` (stdin) cannot be combined with other paths")
            return True
        return False

    @property
    def targets(self) -> tuple[Path, ...]:
        return self.paths or (Path("."),)


def _codes(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    from gpulint.core.settings import ConfigError  # imported when a code list is given, not to start
    from gpulint.selectors import parse_codes

    try:
        return parse_codes(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def codes_option(*decls: str, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A comma-separated list of rule codes or prefixes, validated (exit 2 with a did-you-mean)."""
    return click.option(*decls, callback=_codes, help=help)


CONFIG_OPTIONS: list[Decorator] = [
    click.option("--config", type=click.Path(path_type=Path, dir_okay=False),
                 help="Use this configuration file for every file (no discovery)."),
    click.option("--isolated", is_flag=True, default=None, help="Ignore all configuration files."),
]

LINT_OPTIONS: list[Decorator] = [
    click.argument("paths", nargs=-1, type=click.Path(path_type=Path)),
    codes_option("--select", help="Rule codes or prefixes to enable, comma-separated (GPU1,GPU201)."),
    codes_option("--extend-select", help="Codes or prefixes to enable on top of the selection."),
    codes_option("--ignore", help="Codes or prefixes to disable, comma-separated."),
    click.option("--preview/--no-preview", default=None, help="Enable rules that are still in preview."),
    click.option("--output-format", type=click.Choice(sorted(FORMATS)), default="concise", show_default=True),
    click.option("-o", "--output-file", type=click.Path(path_type=Path, dir_okay=False),
                 help="Write the report (everything printed on stdout) to this file instead."),
    click.option("--unsafe-fixes", is_flag=True, help="Also apply (or count) fixes that may change numerics."),
    click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
    click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: cores)."),
    click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
    click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors."),
    *CONFIG_OPTIONS,
    click.option("--force-exclude", is_flag=True, default=None,
                 help="Apply exclude patterns even to files named on the command line (for pre-commit)."),
    click.option("--statistics", is_flag=True, default=None, help="Show the number of findings per code."),
    click.option("--show-fixes", is_flag=True, default=None,
                 help="Show each finding's fix, and after fixing what was fixed."),
    click.option("--exit-non-zero-on-fix", is_flag=True, default=None,
                 help="Exit 1 when any file was changed by fixes, even if nothing remains."),
    click.option("--stdin-filename", metavar="PATH",
                 help="With `-`: the name of the file read from stdin (for configuration and output)."),
    click.option("--no-cache", is_flag=True, default=None,
                 help="Lint every file again; do not read or write the results cache."),
    click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), envvar=ENV_CACHE_DIR,
                 help=f"Where results are cached (default: ./.gpulint_cache; env {ENV_CACHE_DIR})."),
    click.option("--profile", is_flag=True, default=None,
                 help="Print the time spent per phase and per rule to stderr."),
]

ADD_NOQA_OPTION = click.option("--add-noqa", is_flag=True, default=None,
                               help="Add `# noqa: CODE` comments for every current finding, then exit 0.")
DIFF_BASE_OPTION = click.option(
    "--diff-base", metavar="REV",
    help="Report only findings on lines changed since git revision REV (its merge base with HEAD), "
         "uncommitted and untracked files included.")
FIX_OPTION = click.option("--fix", "apply_fix", is_flag=True, help="Apply safe fixes (same as `gpulint fix`).")


def _apply(options: Sequence[Decorator], func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(options):
        func = option(func)
    return func


def lint_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Every option of `check` and `fix` (`check` adds --fix and --add-noqa)."""
    return _apply(LINT_OPTIONS, func)


def config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--config and --isolated (`show-config`)."""
    return _apply(CONFIG_OPTIONS, func)
