"""The lint worker's fork server (server/worker.py): what it imports, and starting it early.

Apart from child.py because the fork server imports that module; the name of its warm-up module
(server/preload.py) is kept here, as the preload imports child.py.
"""

from __future__ import annotations

from gpulint.server.child import JOBS, serve

PRELOAD = "gpulint.server.preload"  # the fork server warms up with a lint (gpulint's own jobs only)


def fork_server_preload(jobs: str) -> list[str]:
    """What the lint worker's fork server imports before its first fork (server/worker.py)."""
    return [serve.__module__, jobs] + ([PRELOAD] if jobs == JOBS else [])


def start_fork_server() -> None:
    """Start the fork server of gpulint's own jobs now: `gpulint server` calls this before it imports
    click and the protocol layer, so the fork server imports the linter meanwhile (issue 25). It is
    the one the worker uses later (multiprocessing keeps one per process); where there is none to
    start, the worker finds out itself."""
    import multiprocessing

    try:
        if "forkserver" in multiprocessing.get_all_start_methods():
            from multiprocessing import forkserver

            forkserver.set_forkserver_preload(fork_server_preload(JOBS))
            forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - no fork server here: the worker falls back on its own
        pass
