"""`--diff`: a fix as a unified diff, file names quoted as git quotes them."""

from __future__ import annotations

import difflib

from gpulint.output.display import quote_path


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(  # a name that is not UTF-8 still prints, and reads back exactly
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=quote_path(f"a/{path.lstrip('/')}"), tofile=quote_path(f"b/{path.lstrip('/')}"),
    )
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)
