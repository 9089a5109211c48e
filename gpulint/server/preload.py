"""Imported by the lint worker's fork server after the jobs (server/worker.py): warm it up.

A worker is forked from the fork server, and a superseded one is killed and replaced by a fresh fork
on every keystroke into a buffer being linted. What the first lint loads lazily (LibCST for the fixes,
packaging, the project facts' helpers: about 0.3 s) is loaded here once, so no fresh worker pays it.
"""

from __future__ import annotations

import logging

from gpulint.server import jobs

try:
    jobs.warm()
except Exception:
    logging.getLogger("gpulint.server").exception("warming the lint worker failed")
