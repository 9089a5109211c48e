"""Command-line options for speed: the results cache and `--profile`, and `gpulint clean`.

Options are stored in the click context (like cli_workflow's) so the commands' signatures
stay as they are.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import click

from gpulint.engine.cache import ENV_CACHE_DIR, CacheError, ResultCache, clean, default_cache_dir
from gpulint.engine.profile import Profile
from gpulint.engine.runner import POOL_THRESHOLD, FileReport, default_jobs

if TYPE_CHECKING:
    from gpulint.analysis.project import ProjectView

_KEY = "gpulint.performance"


@dataclass
class PerformanceOptions:
    no_cache: bool = False
    cache_dir: Optional[Path] = None
    profile: bool = False
    created: float = field(default_factory=time.perf_counter)
    project_seconds: float = 0.0
    started: Optional[float] = None

    @classmethod
    def current(cls) -> "PerformanceOptions":
        ctx = click.get_current_context(silent=True)
        if ctx is None:
            return cls()
        return ctx.meta.setdefault(_KEY, cls())

    def open_cache(self) -> Optional[ResultCache]:
        return None if self.no_cache else ResultCache.open(self.cache_dir)

    def scan_projects(self, files: Sequence[Path], arguments: Sequence[Path],
                      cache: Optional[ResultCache], jobs: Optional[int] = None) -> dict[str, "ProjectView"]:
        """The project pass (facts from the files around each linted file), timed for --profile."""
        from gpulint.engine.project_scan import scan_projects

        started = time.perf_counter()
        views = scan_projects(files, arguments, cache, workers=jobs or default_jobs())
        self.project_seconds = time.perf_counter() - started
        return views

    def start(self) -> None:
        """Call right before the files are linted: the time since start-up is discovery and configuration."""
        self.started = time.perf_counter()

    def print_profile(self, reports: Sequence[FileReport], jobs: Optional[int]) -> None:
        if not self.profile:
            return
        now = time.perf_counter()
        started = self.started if self.started is not None else now
        profile = Profile()
        for report in reports:
            if report.timings:
                profile.merge(report.timings)
        workers = 1 if len(reports) < POOL_THRESHOLD else (jobs or default_jobs())
        text = profile.render(now - started, workers)
        click.echo(f"gpulint profile: {started - self.created - self.project_seconds:.3f} s finding files and "
                   f"configuration, {self.project_seconds:.3f} s project pass", err=True)
        click.echo(text, nl=False, err=True)


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        options = ctx.meta.setdefault(_KEY, PerformanceOptions())
        if value is not None:
            setattr(options, name, value)

    return callback


PERFORMANCE_OPTIONS = [
    click.option("--no-cache", is_flag=True, default=None, expose_value=False, callback=_store("no_cache"),
                 help="Lint every file again; do not read or write the results cache."),
    click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), envvar=ENV_CACHE_DIR,
                 expose_value=False, callback=_store("cache_dir"),
                 help=f"Where results are cached (default: ./.gpulint_cache; env {ENV_CACHE_DIR})."),
    click.option("--profile", is_flag=True, default=None, expose_value=False, callback=_store("profile"),
                 help="Print the time spent per phase and per rule to stderr."),
]


def performance_options(func: Callable) -> Callable:
    for option in reversed(PERFORMANCE_OPTIONS):
        func = option(func)
    return func


@click.command("clean")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), envvar=ENV_CACHE_DIR,
              help=f"The cache to remove (default: ./.gpulint_cache; env {ENV_CACHE_DIR}).")
def clean_command(cache_dir: Optional[Path]) -> None:
    """Remove the results cache."""
    directory = cache_dir or default_cache_dir()
    try:
        cleaned = clean(directory)
    except CacheError as exc:
        click.echo(f"gpulint: error: {exc}", err=True)
        sys.exit(2)
    if cleaned is None:
        click.echo(f"No cache at {directory}.")
    elif cleaned.left:
        noun = "file" if cleaned.left == 1 else "files"
        click.echo(f"Removed gpulint's {cleaned.removed} files from {cleaned.directory}; left {cleaned.left} "
                   f"{noun} gpulint did not write.")
    else:
        click.echo(f"Removed {cleaned.directory}.")
