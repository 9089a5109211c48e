"""Jobs for the worker's own tests (tests/server/test_hostile_worker.py), run in its child process."""

from __future__ import annotations

import os
import time
from pathlib import Path


def pid() -> int:
    return os.getpid()


def mark_and_sleep(marker: str, seconds: float) -> int:
    """Say that the job runs (the test waits for the file), then take `seconds`."""
    Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def record(path: str) -> str:
    Path(path).write_text("ran")
    return path


def fail() -> None:
    raise ValueError("a bug in a rule")


def die() -> None:
    os._exit(3)  # as the kernel's OOM killer would end it
