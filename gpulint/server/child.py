"""The lint worker's child process (server/worker.py): receive a job, run it, send back the answer.

Kept apart from worker.py so that a fresh child, forked from the fork server, imports nothing more
than this and the jobs (not asyncio: the child never runs an event loop).
"""

from __future__ import annotations

import signal
import traceback
from typing import Any, Callable

JOBS = "gpulint.server.jobs"  # the module of the functions a job names; imported once by the fork server


def job(module: str, name: str) -> Callable[..., Any]:
    import importlib

    return getattr(importlib.import_module(module), name)


def serve(conn: Any, module: str) -> None:
    """The child: run each job received, send back (True, result) or (False, error, traceback),
    until the server closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an editor's Ctrl-C is the server's to handle
    while True:
        try:
            name, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple = (True, job(module, name)(*args))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the server as text
            answer = (False, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return
