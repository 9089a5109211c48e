"""Find and end every process a verification run started, however it detached itself.

A run marks its processes twice: the supervisor becomes a Linux "child subreaper", so orphans
of the run (a double-forked daemon, a child of a killed DataLoader worker) are re-parented to
it rather than to init; and every process inherits `GPULINT_VERIFY_TOKEN`, so a process that
left the tree (its supervisor was killed) is still found by scanning /proc. `killpg` alone
misses `start_new_session=True` children. No torch here; Linux gets the full treatment, other
systems fall back to process groups.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Iterable, Optional

from gpulint.core.signals import die_with_parent as die_with_parent  # supervise.py's, re-exported
from gpulint.core.signals import prctl

TOKEN_ENV = "GPULINT_VERIFY_TOKEN"
PR_SET_CHILD_SUBREAPER = 36
PROC = "/proc"


def become_subreaper() -> bool:
    """Orphaned descendants become our children (so we can find and reap them)."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def _stat(pid: int) -> Optional[tuple[str, int]]:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    tail = data[data.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
    try:
        return tail[0].decode(), int(tail[1])
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of `root`, parents before children."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for pid in _pids():
        info = _stat(pid)
        if info is not None:
            states[pid] = info[0]
            children.setdefault(info[1], []).append(pid)
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        if pid in found:
            continue
        found.append(pid)
        queue.extend(children.get(pid, []))
    return [pid for pid in found if states.get(pid) != "Z"]


def with_token(token: str, exclude: Iterable[int] = ()) -> list[int]:
    """Live processes whose environment carries this run's token (readable for our own user's processes)."""
    needle = f"{TOKEN_ENV}={token}".encode() + b"\0"
    skip = set(exclude) | {os.getpid()}
    found = []
    for pid in _pids():
        if pid in skip:
            continue
        try:
            with open(f"{PROC}/{pid}/environ", "rb") as handle:
                environ = handle.read() + b"\0"
        except OSError:
            continue
        if (environ.startswith(needle) or b"\0" + needle in environ) and (_stat(pid) or ("Z", 0))[0] != "Z":
            found.append(pid)
    return found


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def reap() -> None:
    """Collect exited children (subreapers inherit zombies of orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants(root: int, token: Optional[str], grace: float = 1.0) -> int:
    """SIGTERM the tree below `root` (and token holders), SIGKILL what is left after `grace`; returns how many."""
    def current() -> list[int]:
        pids = descendants(root)
        if token is not None:
            pids += [p for p in with_token(token, exclude=[root]) if p not in pids]
        return pids

    found: set[int] = set()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap()
        pids = current()
        if not pids:
            return len(found)
        fresh = [p for p in pids if p not in found]
        found.update(fresh)
        signal_all(fresh, signal.SIGTERM)
        time.sleep(0.05)
    for _ in range(100):
        reap()
        pids = current()
        if not pids:
            break
        found.update(pids)
        signal_all(pids, signal.SIGKILL)
        time.sleep(0.02)
    return len(found)


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
