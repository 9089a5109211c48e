"""`gpulint server`'s entry point: the lint worker starts before the protocol is imported."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def serve(cache: bool = True, cache_dir: Optional[Path] = None) -> None:
    """Run the server on stdin/stdout. The lint worker starts first, in a thread: its process imports
    the linter while this one imports the protocol layer and answers `initialize`, so the first file
    opened is linted without waiting for both one after the other."""
    import threading

    from gpulint.server.worker import Worker

    worker = Worker()
    threading.Thread(target=worker.warm, name="gpulint-warm-worker", daemon=True).start()
    from gpulint.server.lsp import serve as serve_lsp

    serve_lsp(cache, cache_dir, worker)
