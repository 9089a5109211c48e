"""The command-line flags a project's shipped shell scripts pass (`python run.py --use_multi_gpu ...`).

A code path behind an argparse flag that defaults to off runs only when someone passes the flag. The
scripts a repository ships (`scripts/*.sh`) are how its authors run it; a flag none of them passes is a
path the project does not take by default (GPU502: DataParallel behind `--use_multi_gpu`). Flags are read
as words: every `--name` or `--name=value` in any `*.sh` file under the project's root, with dashes taken
as underscores (argparse's `dest`). Reading is bounded; a file that cannot be read passes nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
_SKIP = frozenset({".git", ".hg", ".svn", "venv", ".venv", "env", "site-packages", "node_modules", "__pycache__",
                   "build", "dist", ".tox", ".nox"})
_MAX_FILES = 2000
_MAX_BYTES = 1024 * 1024


def passed_flags(root: Path) -> frozenset[str]:
    """Every flag (as an argparse dest) a `*.sh` file under `root` passes."""
    found: set[str] = set()
    read = 0
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in _SKIP and not f.startswith("."))
        for name in sorted(files):
            if not name.endswith(".sh"):
                continue
            read += 1
            if read > _MAX_FILES:
                return frozenset(found)
            path = os.path.join(directory, name)
            try:
                if os.path.getsize(path) > _MAX_BYTES:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            found.update(flag.replace("-", "_") for flag in _FLAG.findall(text))
    return frozenset(found)
