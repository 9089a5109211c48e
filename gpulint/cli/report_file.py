"""`-o/--output-file FILE`: what a lint run prints on stdout goes to FILE instead.

The report is written to a temporary file beside FILE and renamed over it when the run ends, so
a CI artifact is never half-written (an interrupted run leaves FILE as it was). Missing parent
folders are created. A name with a suffix gpulint lints (`-o train.py`) is refused: a report must
never replace source code. A symbolic link is written through (the file it names is replaced, the
link stays), and what is not a regular file once links are followed (`/dev/null`, `/dev/stdout`, a
FIFO) is written to in place: renaming over it would replace the device or pipe with a plain file.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import click

SOURCE_SUFFIXES = (".py", ".pyi", ".pyw", ".ipynb")


class ReportFileError(Exception):
    """The finished report could not be put in place (exit 2)."""


def check_report_path(path: Path) -> None:
    """A usage error (exit 2) for a path a report must not go to."""
    if path.suffix.lower() in SOURCE_SUFFIXES:
        raise click.UsageError(f"--output-file {path}: refusing to write the report over a Python file or "
                               "notebook (give the report its own name, e.g. gpulint-report.json)")
    if path.is_dir():
        raise click.UsageError(f"--output-file {path}: is a folder; name a file")


def _stream_target(path: Path) -> bool:
    """Whether `path`, links followed, exists and is not a regular file (a device, a FIFO, a socket)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # not there (or a dangling link): made as a regular file


@contextlib.contextmanager
def _stdout_streamed(path: Path) -> Iterator[None]:
    """Stdout written straight to a device or pipe: there is nothing to keep whole."""
    try:
        raw = open(path, "wb")  # noqa: SIM115 (closed below, after stdout is given back)
    except OSError as exc:
        raise click.UsageError(f"--output-file {path}: {exc.strerror or exc}") from None
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
    previous = sys.stdout
    sys.stdout = stream
    try:
        yield
        stream.flush()
    finally:
        sys.stdout = previous
        stream.close()


@contextlib.contextmanager
def stdout_to(path: Path) -> Iterator[None]:
    """Everything written to stdout (text and bytes) in the block lands in `path`, atomically when it is a
    regular file (or none yet), through a link to one, and in place when it is a device or a pipe."""
    check_report_path(path)
    if _stream_target(path):
        with _stdout_streamed(path):
            yield
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # the link stays; the file it names is replaced
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise click.UsageError(f"--output-file {path}: {exc.strerror or exc}") from None
    stream = io.TextIOWrapper(os.fdopen(handle, "wb"), encoding="utf-8", errors="surrogateescape")
    previous = sys.stdout
    sys.stdout = stream
    try:
        yield
        stream.flush()
    except BaseException:
        sys.stdout = previous
        stream.close()
        os.unlink(temporary)
        raise
    sys.stdout = previous
    stream.close()
    try:
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except OSError as exc:
        os.unlink(temporary)
        raise ReportFileError(f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
