"""Linting off the server's event loop, in child processes a newer job can stop.

A 0.9 MB buffer takes LibCST and the rules tens of seconds; on the event loop that blocked
every request (hover, shutdown) for as long. Jobs run in up to two child processes (a
large buffer being linted does not hold up a code action in another file), in arrival
order; each names the document it is for, and a newer job for the same document supersedes
the older one: still queued, it never runs; already running, its child is killed (pure-
Python work cannot be interrupted any other way) and a fresh one takes the next job. The
server's own threads only wait on pipes.

Where child processes cannot be started (a sandbox without fork or pipes), jobs run in a
thread of the server instead: requests are still answered meanwhile, but a superseded job
runs to its end and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import traceback
from typing import Any, Optional

from gpulint.server.child import JOBS, job, serve

log = logging.getLogger("gpulint.server")

KILL_WAIT_S = 10.0
PRELOAD = "gpulint.server.preload"  # the fork server warms up with a lint (gpulint's own jobs only)


class Superseded(Exception):
    """A newer job for the same document took this job's place; its result would be stale."""


class JobFailed(Exception):
    """The job raised in the worker (a bug), or the worker died under it (killed, out of memory)."""


class _Child:
    """One child process and the pipe to it; used by one job's thread at a time."""

    def __init__(self, jobs: str) -> None:
        self.jobs = jobs
        self.process: Any = None
        self.conn: Any = None
        self.doomed = False  # killed: never sent another job, even before it is seen dead
        self.lock = threading.Lock()  # the event loop kills while a thread waits on the pipe

    def _start(self) -> Any:
        import multiprocessing

        if "forkserver" in multiprocessing.get_all_start_methods():
            context: Any = multiprocessing.get_context("forkserver")
            preload = [serve.__module__, self.jobs] + ([PRELOAD] if self.jobs == JOBS else [])
            context.set_forkserver_preload(preload)
        else:
            context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(target=serve, args=(child, self.jobs), name="gpulint-lint-worker", daemon=True)
        process.start()
        child.close()  # the parent's copy: a dead child then reads as EOF
        self.process, self.conn = process, parent
        return parent

    def connection(self) -> Any:
        """The pipe to a live child, started if need be (from the job's thread: starting costs imports)."""
        with self.lock:
            if self.process is not None and not self.doomed and self.process.is_alive():
                return self.conn
            self.reap()
            return self._start()

    def reap(self) -> Optional[int]:
        """Forget a dead or killed child; its exit code. Called with the lock held, by the thread that
        uses the pipe (closing it under another thread's read could hand that read a new file that got
        the same number)."""
        process, conn = self.process, self.conn
        self.process = self.conn = None
        self.doomed = False
        if conn is not None:
            conn.close()
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join(KILL_WAIT_S)
        return process.exitcode

    def kill(self) -> None:
        """Kill the child now; the job's thread sees the pipe end."""
        with self.lock:
            if self.process is not None:
                self.doomed = True
                self.process.kill()


class Worker:
    """Runs the server's jobs in child processes, a newer job per document first (see the module docstring)."""

    def __init__(self, jobs: str = JOBS, size: int = 2) -> None:
        self.jobs = jobs
        self._idle = [_Child(jobs) for _ in range(max(1, size))]  # the last is used first
        self._slots: Optional[asyncio.Semaphore] = None  # free children; waiters are served in order
        self._latest: dict[str, int] = {}  # the newest job's token per document
        self._running: dict[str, tuple[int, _Child]] = {}  # per document: the job running and its child
        self._tokens = itertools.count(1)
        self.inline = False  # True once child processes turned out to be unavailable
        self.stopped = False

    def warm(self) -> None:
        """Start one child ahead of the first job (from a thread: starting costs imports)."""
        try:
            self._idle[-1].connection()
        except Exception as exc:  # noqa: BLE001 - no child processes here: jobs run in a thread
            log.warning("lint worker unavailable, linting in a thread instead: %s", exc)
            self.inline = True

    def stop(self) -> None:
        """Kill every child for good: the server is shutting down or exiting."""
        self.stopped = True
        for child in self._idle + [child for _, child in self._running.values()]:
            child.kill()

    def _inline(self, name: str, args: tuple) -> Any:
        try:
            return job(self.jobs, name)(*args)
        except Exception as exc:  # noqa: BLE001 - as from a child: a bug in a job is reported, not raised
            raise JobFailed(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from None

    def _call(self, child: _Child, key: str, token: int, name: str, args: tuple) -> Any:
        """Run one job in `child` (from a thread); raises Superseded or JobFailed."""
        if self.stopped or self._latest.get(key) != token:
            raise Superseded(key)
        if self.inline:
            return self._inline(name, args)
        try:
            conn = child.connection()
        except Exception as exc:  # noqa: BLE001 - no child processes here: lint in a thread from now on
            log.warning("lint worker unavailable, linting in a thread instead: %s", exc)
            self.inline = True
            return self._inline(name, args)
        try:
            conn.send((name, args))
            answer = conn.recv()
        except (EOFError, OSError) as exc:
            with child.lock:
                code = child.reap()
            if self._latest.get(key) != token or self.stopped:
                raise Superseded(key) from None
            raise JobFailed(f"the lint worker stopped ({exc or 'killed'}, exit code {code})") from None
        if not answer[0]:
            raise JobFailed(f"{answer[1]}\n{answer[2]}")
        return answer[1]

    def supersede(self, key: str) -> int:
        """Make every earlier job for `key` stale (the running one is stopped); the new token."""
        token = next(self._tokens)
        self._latest[key] = token
        running = self._running.get(key)
        if running is not None:
            running[1].kill()
        return token

    def forget(self, key: str) -> None:
        """The document is closed: stop its jobs, queued or running."""
        self.supersede(key)
        self._latest.pop(key, None)

    async def run(self, key: str, name: str, *args: Any) -> Any:
        """Job `name` (of server/jobs.py) called with `args` in a child, after the jobs queued before
        it. Raises Superseded when a newer job for `key` came first, JobFailed when the job failed."""
        token = self.supersede(key)
        if self._slots is None:
            self._slots = asyncio.Semaphore(len(self._idle))
        async with self._slots:
            if self._latest.get(key) != token:
                raise Superseded(key)
            child = self._idle.pop()
            self._running[key] = (token, child)
            call = asyncio.ensure_future(asyncio.to_thread(self._call, child, key, token, name, args))
            try:
                result = await asyncio.shield(call)
            except asyncio.CancelledError:  # the request waiting for it was cancelled: stop the job too,
                child.kill()  # and keep the child until its thread is done with the pipe
                with contextlib.suppress(BaseException):
                    await call
                raise
            finally:
                if self._running.get(key, (None,))[0] == token:
                    del self._running[key]
                self._idle.append(child)
        if self._latest.get(key) != token:
            raise Superseded(key)
        return result
