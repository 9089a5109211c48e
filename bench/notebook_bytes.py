"""What `gpulint fix` changes in a notebook, next to what a load-and-dump with nbformat changes.

For each notebook (the test notebooks shaped like JupyterLab's, Colab's, Kaggle's and a Windows
editor's, and examples/churn.ipynb): the JSON lines that differ after `gpulint fix --unsafe-fixes`,
how many of them lie outside the edited sources (must be 0), and the lines that differ after
`nbformat.writes(nbformat.reads(...))`, which is what a tool that loads and saves the notebook
would write. A script, not a test (tests/notebook/ asserts the invariants).

    python bench/notebook_bytes.py
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "tests" / "notebook" / "notebooks").glob("*.ipynb")) + [ROOT / "examples" / "churn.ipynb"]


def changed_lines(before: str, after: str) -> int:
    return sum(1 for line in difflib.ndiff(before.splitlines(True), after.splitlines(True))
               if line.startswith(("+ ", "- ")))


def outside_sources(before: bytes, after: bytes) -> int:
    """Characters that differ outside the cells' source values (0 when only sources changed)."""
    sys.path.insert(0, str(ROOT))
    from gpulint.notebook.model import load_notebook

    def outside(raw: bytes) -> str:
        nb = load_notebook(raw)
        pieces, position = [], 0
        for cell in nb.cells:
            pieces.append(nb.text[position:cell.span[0]])
            position = cell.span[1]
        return "".join(pieces) + nb.text[position:]

    a, b = outside(before), outside(after)
    return sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))


def main() -> None:
    print("| notebook | bytes | lines changed by `gpulint fix` | characters changed outside the edited sources | "
          "lines changed by an nbformat load and dump |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for path in NOTEBOOKS:
            copy = Path(folder) / path.name
            shutil.copy(path, copy)
            before = copy.read_bytes()
            subprocess.run([sys.executable, "-m", "gpulint", "fix", "--unsafe-fixes", "--no-cache", "--isolated",
                            str(copy)], capture_output=True, cwd=folder, check=False)
            after = copy.read_bytes()
            text = before.decode("utf-8-sig")
            dumped = nbformat.writes(nbformat.reads(text, as_version=4))
            print(f"| {path.relative_to(ROOT)} | {len(before)} | {changed_lines(text, after.decode('utf-8-sig'))} | "
                  f"{outside_sources(before, after)} | {changed_lines(text, dumped)} |")


if __name__ == "__main__":
    main()
