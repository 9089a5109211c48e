"""Progress bars on a terminal only: never in CI, in a pipe, or on stdout (where reports go)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Iterator, Optional, TextIO

import click

PROGRESS_MIN_FILES = 300  # below this a run is over before a bar would help


def progress_wanted(stream: Optional[TextIO] = None) -> bool:
    """A person is watching: stderr is a terminal, not a dumb one, and this is not a CI job."""
    stream = stream or sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return terminal and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


@contextlib.contextmanager
def file_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    """`advance(n)` moves a bar of `total` files on stderr; it does nothing when no bar is shown."""
    if total < PROGRESS_MIN_FILES or not progress_wanted():
        yield lambda n: None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True, show_eta=True) as bar:
        yield bar.update
