"""Stopping: SIGTERM and SIGHUP end a run the way Ctrl-C does, and a signal ignored at start stays ignored.

`kill PID`, a CI job's timeout and a closed terminal send SIGTERM or SIGHUP, to gpulint alone or
to its whole process group. Their default action kills at once: worker processes were left
behind (reparented to init, waiting forever) and a temporary file beside a file being fixed
stayed in the user's tree. In the main process they raise `Interrupted` (a KeyboardInterrupt),
so the same clean-up runs as for Ctrl-C; worker processes note them (engine/runner.py).

A signal that was ignored when gpulint started stays ignored: `nohup` ignores SIGHUP, and a
background job of a script starts with SIGINT ignored; reacting to them in some processes of
the run and not in others is how a run once ended "All checks passed!" with files unlinted.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main process like Ctrl-C's KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def ignored(signum: int) -> bool:
    """Whether `signum` is ignored (it was when the process started, or someone chose so since)."""
    return signal.getsignal(signum) is signal.SIG_IGN


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise `Interrupted` unless they are ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP) if not ignored(sig)}
    for sig in previous:
        signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def held_while_forking() -> Iterator[None]:
    """Stop signals wait while worker processes are started.

    A forked child inherits the handlers of the main process, which raise `Interrupted`; a SIGTERM
    that reached a worker before its initializer replaced them printed "Exception in initializer"
    and a traceback (a pool that breaks terminates its other workers, some still starting). The
    child inherits the mask too and unblocks once its own handlers are in (`release_held`).
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_held() -> None:
    """In a worker whose handlers are installed: the stop signals held while it started arrive now."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def interrupted_by(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (Ctrl-C's SIGINT unless it is an `Interrupted`)."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def exit_status(signum: int) -> int:
    """128 + the signal, as shells report a process a signal ended (130 for Ctrl-C)."""
    return 128 + signum


def describe(signum: int) -> str:
    """"interrupted", or "interrupted (SIGTERM)" for another signal than Ctrl-C's."""
    return "interrupted" if signum == signal.SIGINT else f"interrupted ({signal.Signals(signum).name})"


def prctl(option: int, value: int) -> bool:
    """Linux's prctl(2) with one argument; False where it is not available or fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `signum` when the parent process dies (Linux), even by SIGKILL."""
    return prctl(PR_SET_PDEATHSIG, int(signum))
