"""Linting off the server's event loop, in a child process a newer job can stop.

A 0.9 MB buffer takes LibCST and the rules tens of seconds; on the event loop that blocked
every request (hover, shutdown) for as long. Jobs run one at a time in one child process;
each names the document it is for, and a newer job for the same document supersedes the
older one: still queued, it never runs; already running, the child is killed (pure-Python
work cannot be interrupted any other way) and a fresh one takes the next job. The server's
own thread only waits on a pipe.

Where child processes cannot be started (a sandbox without fork or pipes), jobs run in a
thread of the server instead: requests are still answered meanwhile, but a superseded job
runs to its end and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import threading
import traceback
from typing import Any, Callable, Optional

log = logging.getLogger("gpulint.server")
JOBS = "gpulint.server.jobs"  # the functions a job names; imported once by the fork server
PRELOAD = [JOBS]
KILL_WAIT_S = 10.0


class Superseded(Exception):
    """A newer job for the same document took this job's place; its result would be stale."""


class JobFailed(Exception):
    """The job raised in the worker (a bug), or the worker died under it (killed, out of memory)."""


def _job(name: str) -> Callable[..., Any]:
    import importlib

    return getattr(importlib.import_module(JOBS), name)


def _serve(conn: Any) -> None:
    """The child: run each job received, send back (True, result) or (False, error, traceback),
    until the server closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an editor's Ctrl-C is the server's to handle
    while True:
        try:
            name, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple = (True, _job(name)(*args))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the server as text
            answer = (False, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return


class Worker:
    """One child process that runs the server's jobs in order (see the module docstring)."""

    def __init__(self) -> None:
        self._process: Any = None
        self._conn: Any = None
        self._state = threading.Lock()  # guards _process and _conn (the loop kills, a thread waits)
        self._doomed = False  # the child was killed: never send it another job
        self._turn: Optional[asyncio.Lock] = None  # one job at a time, in arrival order
        self._latest: dict[str, int] = {}  # the newest job's token per document
        self._running: Optional[tuple[str, int]] = None
        self._tokens = itertools.count(1)
        self.inline = False  # True once child processes turned out to be unavailable
        self.stopped = False

    # --- the child --------------------------------------------------------------------------
    def _start(self) -> Any:
        import multiprocessing

        if "forkserver" in multiprocessing.get_all_start_methods():
            context: Any = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
        else:
            context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(child,), name="gpulint-lint-worker", daemon=True)
        process.start()
        child.close()  # the parent's copy: a dead child then reads as EOF
        self._process, self._conn = process, parent
        return parent

    def _connection(self) -> Any:
        """The pipe to a live child, started if need be (only from the thread that runs the job)."""
        with self._state:
            if self.stopped:
                raise Superseded("the server is stopping")
            if self._process is not None and not self._doomed and self._process.is_alive():
                return self._conn
            self._reap()
            return self._start()

    def _reap(self) -> None:
        """Forget a dead or killed child (called with _state held, by the one thread that uses the pipe:
        closing it under another thread's read could hand that read a new file with the same number)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        self._doomed = False
        if conn is not None:
            conn.close()
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(KILL_WAIT_S)

    def kill(self) -> None:
        """Kill the child now (a superseded job); the job's thread sees the pipe end, and the next job
        starts a fresh child even if this one has not died yet."""
        with self._state:
            if self._process is not None:
                self._doomed = True
                self._process.kill()

    def stop(self) -> None:
        """Kill the child for good: the server is shutting down or exiting."""
        with self._state:
            self.stopped = True
        self.kill()

    def warm(self) -> None:
        """Start the child ahead of the first job (from a thread: starting costs imports)."""
        try:
            self._connection()
        except Superseded:
            pass
        except Exception as exc:  # noqa: BLE001 - no child processes here: jobs run in a thread
            log.warning("lint worker unavailable, linting in a thread instead: %s", exc)
            self.inline = True

    def _inline(self, name: str, args: tuple) -> Any:
        try:
            return _job(name)(*args)
        except Exception as exc:  # noqa: BLE001 - as from the child: a bug in a job is reported, not raised
            raise JobFailed(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from None

    def _call(self, key: str, token: int, name: str, args: tuple) -> Any:
        """Run one job in the child (from a thread); raises Superseded or JobFailed."""
        if self.inline:
            return self._inline(name, args)
        try:
            conn = self._connection()
        except Superseded:
            raise
        except Exception as exc:  # noqa: BLE001 - fall back to a thread, once and for all
            log.warning("lint worker unavailable, linting in a thread instead: %s", exc)
            self.inline = True
            return self._inline(name, args)
        if self._latest.get(key) != token:
            raise Superseded(key)
        try:
            conn.send((name, args))
            answer = conn.recv()
        except (EOFError, OSError) as exc:
            with self._state:
                code = self._process.exitcode if self._process is not None else None
                self._reap()
            if self._latest.get(key) != token or self.stopped:
                raise Superseded(key) from None
            raise JobFailed(f"the lint worker stopped ({exc or 'killed'}, exit code {code})") from None
        if not answer[0]:
            raise JobFailed(f"{answer[1]}\n{answer[2]}")
        return answer[1]

    # --- jobs -------------------------------------------------------------------------------
    def supersede(self, key: str) -> int:
        """Make every earlier job for `key` stale (the running one is stopped); the new token."""
        token = next(self._tokens)
        self._latest[key] = token
        if self._running is not None and self._running[0] == key:
            self.kill()
        return token

    def forget(self, key: str) -> None:
        """The document is closed: stop its jobs, queued or running."""
        self.supersede(key)
        self._latest.pop(key, None)

    async def run(self, key: str, name: str, *args: Any) -> Any:
        """Job `name` of server/jobs.py called with `args` in the worker, after the jobs queued before
        it. Raises Superseded when a newer job for `key` came first, JobFailed when the job failed."""
        token = self.supersede(key)
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:
            if self._latest.get(key) != token:
                raise Superseded(key)
            self._running = (key, token)
            call = asyncio.ensure_future(asyncio.to_thread(self._call, key, token, name, args))
            try:
                result = await asyncio.shield(call)
            except asyncio.CancelledError:  # the request waiting for it was cancelled: stop the job too,
                self.kill()  # and keep the turn until its thread is done with the pipe
                with contextlib.suppress(BaseException):
                    await call
                raise
            finally:
                self._running = None
        if self._latest.get(key) != token:
            raise Superseded(key)
        return result
