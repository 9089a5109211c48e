"""How good is the progress bar's time estimate? One cold `gpulint check` of a tree, with the time
each file was reported done recorded, then both estimates replayed at 2, 5, 10, 25 and 50 % of
the files: the count-based one (click's: elapsed / files done x files left) and gpulint's
(gpulint/output/progress.py: work left at the rate of the recent work, a file's work being its size).
Each is printed as a ratio to the time that was really left (1.00x is exact).

    python bench/progress_estimate.py /work/corpus/dev -j 2
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpulint.cli import lint  # noqa: E402
from gpulint.cli.options import LintOptions  # noqa: E402
from gpulint.output.progress import Estimate, work_of  # noqa: E402

MARKS = (0.02, 0.05, 0.10, 0.25, 0.50)


def record(path: Path, jobs: int) -> tuple[list[Path], list[tuple[float, list[Path]]]]:
    """The files of a cold check, and (seconds since the start, files) for each report of progress."""
    events: list[tuple[float, list[Path]]] = []
    files: list[Path] = []

    @contextlib.contextmanager
    def recorder(paths: Sequence[Path], label: str) -> Iterator[Any]:
        files.extend(paths)
        start = time.monotonic()
        yield lambda done, cached: events.append((time.monotonic() - start, list(done))) if not cached else None

    lint.file_progress = recorder  # type: ignore[assignment]
    options = LintOptions.of(paths=(path,), no_cache=True, jobs=jobs, output_format="json")
    with contextlib.redirect_stdout(io.StringIO()):
        lint.lint_command(options)
    return files, events


def replay(files: list[Path], events: list[tuple[float, list[Path]]]) -> list[tuple[float, float, float]]:
    """(share of files, count-based estimate / truth, size-based estimate / truth) at each mark."""
    total_time = events[-1][0]
    now = [0.0]
    estimate = Estimate({str(p): work_of(p) for p in files}, clock=lambda: now[0])
    done = 0
    marks = list(MARKS)
    rows = []
    for when, paths in events:
        now[0] = when
        estimate.advance(paths, False)
        done += len(paths)
        while marks and done >= marks[0] * len(files):
            left = total_time - when
            by_count = when / done * (len(files) - done)
            by_size = estimate.seconds_left() or 0.0
            rows.append((marks.pop(0), by_count / left, by_size / left))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    files, events = record(args.path, args.jobs)
    print(f"{args.path}: {len(files)} files, {events[-1][0]:.1f} s cold with -j {args.jobs}")
    print("files done | count-based estimate / time left | size-based (gpulint) / time left")
    for share, by_count, by_size in replay(files, events):
        print(f"{share:>9.0%} | {by_count:>10.2f}x | {by_size:>10.2f}x")


if __name__ == "__main__":
    main()
