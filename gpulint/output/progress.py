"""Progress bars on a terminal only: never in CI, in a pipe, or on stdout (where reports go).

The time left is estimated from the files done weighted by their size, not from their count:
the runner lints the largest files first (no straggler at the end), so a count-based estimate
early in a run is many times too high (16x at a tenth of the 20-repository precision corpus,
where this one was 1.4x: bench/RESULTS.md, "Progress bar estimate").
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, TextIO

PROGRESS_MIN_FILES = 300  # below this a run is over before a bar would help
WINDOW = 5.0  # seconds of recent work the rate is measured over (the cost per byte drifts during a run)
NOTEBOOK_SHARE = 8  # a notebook counts an eighth of its bytes: outputs and metadata are not linted
REDRAW = 0.2  # seconds between two drawings of the bar
WIDTH = 30


def progress_wanted(stream: Optional[TextIO] = None) -> bool:
    """A person is watching: stderr is a terminal, not a dumb one, and this is not a CI job."""
    stream = stream or sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return terminal and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


def work_of(path: Path) -> float:
    """How much linting a file is, in bytes of source (a notebook: an eighth of the file)."""
    try:
        size = float(os.path.getsize(path))
    except OSError:
        return 0.0
    return size / NOTEBOOK_SHARE if str(path).endswith(".ipynb") else size


class Estimate:
    """Seconds left in a run: the work left, at the rate the last WINDOW seconds of work went.

    Work is bytes (`work_of`); files answered by the cache are no work and leave the total.
    """

    def __init__(self, work: dict[str, float], clock: Callable[[], float] = time.monotonic) -> None:
        self.work = work
        self.left = sum(work.values())
        self.clock = clock
        self.started = clock()
        self.done: deque[tuple[float, float]] = deque()  # (when, cumulative work done), for the window
        self.total_done = 0.0

    def advance(self, paths: Sequence[Path], cached: bool) -> None:
        amount = sum(self.work.get(os.fspath(p), 0.0) for p in paths)
        self.left = max(0.0, self.left - amount)
        if cached:
            self.started = self.clock()  # the cache answered at once: the clock starts with the work
            return
        self.total_done += amount
        now = self.clock()
        self.done.append((now, self.total_done))
        while len(self.done) > 2 and self.done[1][0] <= now - WINDOW:
            self.done.popleft()

    def seconds_left(self) -> Optional[float]:
        """None until some work is done."""
        if not self.done or self.total_done <= 0:
            return None
        now, work_now = self.done[-1]
        since, work_then = self.done[0]
        if now - since >= WINDOW / 2 and work_now > work_then:  # enough of a window: its rate
            rate = (work_now - work_then) / (now - since)
        else:  # early: everything done so far
            elapsed = now - self.started
            if elapsed <= 0:
                return None
            rate = self.total_done / elapsed
        return self.left / rate if rate > 0 else None


def _clock_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "--:--"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes:02}:{secs:02}"


class Bar:
    """`Checking  [#####-----]  120/310  00:12` on one line of `stream`, redrawn in place."""

    def __init__(self, label: str, paths: Sequence[Path], stream: TextIO,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = len(paths)
        self.files = 0
        self.stream = stream
        self.clock = clock
        self.estimate = Estimate({os.fspath(p): work_of(p) for p in paths}, clock)
        self.drawn = -REDRAW

    def line(self) -> str:
        filled = WIDTH * self.files // self.total if self.total else WIDTH
        eta = "" if self.files >= self.total else "  " + _clock_text(self.estimate.seconds_left())
        return f"{self.label}  [{'#' * filled}{'-' * (WIDTH - filled)}]  {self.files}/{self.total}{eta}"

    def advance(self, paths: Sequence[Path], cached: bool) -> None:
        self.files += len(paths)
        self.estimate.advance(paths, cached)
        now = self.clock()
        if now - self.drawn >= REDRAW or self.files >= self.total:
            self.drawn = now
            self.draw()

    def draw(self) -> None:
        self.stream.write("\r" + self.line() + "\033[K")
        self.stream.flush()

    def finish(self) -> None:
        self.draw()
        self.stream.write("\n")
        self.stream.flush()


@contextlib.contextmanager
def file_progress(paths: Sequence[Path], label: str) -> Iterator[Callable[[Sequence[Path], bool], None]]:
    """`advance(paths, cached)` moves a bar of the files in `paths` on stderr; it does nothing when
    no bar is shown (a small run, CI, a pipe)."""
    if len(paths) < PROGRESS_MIN_FILES or not progress_wanted():
        yield lambda done, cached: None
        return
    bar = Bar(label, paths, sys.stderr)
    bar.draw()
    try:
        yield bar.advance
    finally:
        bar.finish()
