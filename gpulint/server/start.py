"""`gpulint server`'s entry point. No lint worker is started here: the first large buffer starts
one (server/worker.py), so a start-up that opens a small file pays for one interpreter, not two."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def serve(cache: bool = True, cache_dir: Optional[Path] = None) -> None:
    """Run the server on stdin/stdout."""
    from gpulint.server.lsp import serve as serve_lsp

    serve_lsp(cache, cache_dir)
