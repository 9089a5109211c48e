"""Imported by the lint worker's fork server after the jobs (server/worker.py): warm it up, once idle.

A worker is forked from the fork server, and a superseded one is killed and replaced by a fresh fork
on every keystroke into a buffer being linted. What a lint with its fixes' edits loads lazily (LibCST,
the rewrites: about 0.2 s) is loaded in the fork server once, so no fresh worker pays it.

Not before the first worker is forked, though (issue 25): that worker lints the first file opened,
and a lint for diagnostics loads nothing the jobs did not (no edits, no LibCST), so a warm-up ahead
of it only delayed the first diagnostics. The fork server warms up once it has forked a worker and
then had nothing to do for WARM_AFTER_S (that worker's first lint is then likely done: on a loaded
machine the two shared the CPU). It learns both from its own event loop
(`multiprocessing.forkserver.main` waits on `selectors.DefaultSelector`), the one place it runs
anything between forks; where that loop is not found, it warms up at once, as it did before.
"""

from __future__ import annotations

from gpulint.server import jobs
from gpulint.server.child import after_first_fork

WARM_AFTER_S = 0.25  # the fork server idle this long after its first fork: the first lint is likely done


def _warm() -> None:
    try:
        jobs.warm()
    except Exception:
        import logging  # not before the first fork: only a failure needs it

        logging.getLogger("gpulint.server").exception("warming the lint worker failed")


def _install() -> None:
    from multiprocessing import forkserver

    if not after_first_fork(_warm, forkserver, WARM_AFTER_S):
        _warm()


_install()
