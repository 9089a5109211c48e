"""The lint worker's child process (server/worker.py): receive a job, run it, send back the answer.

Kept apart from worker.py so that a fresh child, forked from the fork server, imports nothing more
than this and the jobs (not asyncio: the child never runs an event loop). `after_first_fork` is the
fork server's: when it warms up (server/preload.py).
"""

from __future__ import annotations

import selectors
import signal
import socket
import traceback
import types
from typing import Any, Callable, Optional

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


def after_first_fork(warm: Callable[[], None], module: Any, idle_s: float = 0.0) -> bool:
    """Make the fork server in `module` (multiprocessing.forkserver) call `warm` once, the first time
    it has waited `idle_s` seconds with nothing to do after a fork request was handed to it; False
    where its loop does not wait on `selectors.DefaultSelector` (then nothing is changed)."""
    if getattr(module, "selectors", None) is not selectors or not callable(getattr(module, "main", None)):
        return False
    base: type = selectors.DefaultSelector

    class Deferred(base):
        """The fork server's selector: a fork request seen (its listening socket was ready), the next
        wait that finds nothing ready for `idle_s` warms up first."""

        forked = False
        warmed = False

        def select(self, timeout: Optional[float] = None) -> list:
            if self.forked and not self.warmed:
                ready = super().select(idle_s if timeout is None else min(idle_s, timeout))
                if ready:
                    return ready
                self.warmed = True
                warm()
            ready = super().select(timeout)
            if any(isinstance(key.fileobj, socket.socket) for key, _ in ready):
                self.forked = True
            return ready

    shim = types.ModuleType("selectors")
    shim.__dict__.update(vars(selectors))
    shim.DefaultSelector = Deferred  # type: ignore[attr-defined]
    module.selectors = shim  # the fork server's own name for the module; nothing else sees the change
    return True
