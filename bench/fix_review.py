"""Draw unsafe fixes from the corpus at random (seeded) and print each as a diff, for a reviewer.

    python bench/fix_review.py --corpus /work/corpus/dev --sample 30 --seed 23 > /tmp/review.md

Every `.py` file of every repository is checked with `gpulint check --unsafe-fixes --output-format
json` (the corpus is only read); the findings whose fix is unsafe are pooled, sorted, and a seeded
random sample is drawn. Each one is printed as the diff of that fix alone on its file, with its
rule, message, fix message and note. The verdicts of a reading (mergeable as is or not, and why)
are recorded in bench/precision/fix_review.md by file and line only: the diffs hold the repositories' code and
are not committed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class Drawn:
    repo: str
    path: str  # relative to the repository
    row: int
    code: str
    message: str
    fix: dict[str, Any]
    note: Optional[str]


def unsafe_fixes(corpus: Path, repo: str) -> list[Drawn]:
    folder = corpus / repo
    done = subprocess.run([sys.executable, "-m", "gpulint", "check", "--unsafe-fixes", "--no-cache", "--exit-zero",
                           "--output-format", "json", "."], cwd=folder, capture_output=True, text=True)
    found = []
    for item in json.loads(done.stdout or "[]"):
        fix = item.get("fix")
        if not fix or fix["applicability"] != "unsafe" or item.get("cell") is not None:
            continue  # notebooks left out: their edits are per cell
        path = os.path.relpath(item["filename"], folder)
        found.append(Drawn(repo, path, item["location"]["row"], item["code"], item["message"], fix, item.get("note")))
    return found


def _offset(starts: list[int], row: int, column: int) -> int:
    return starts[row - 1] + column - 1


def fixed_text(text: str, fix: dict[str, Any]) -> str:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = sorted(((_offset(starts, e["location"]["row"], e["location"]["column"]),
                     _offset(starts, e["end_location"]["row"], e["end_location"]["column"]), e["content"])
                    for e in fix["edits"]), reverse=True)
    for start, end, content in edits:
        text = text[:start] + content + text[end:]
    return text


def render(drawn: Drawn, corpus: Path, index: int) -> str:
    text = (corpus / drawn.repo / drawn.path).read_text(encoding="utf-8")
    after = fixed_text(text, drawn.fix)
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{drawn.path}", f"b/{drawn.path}", n=4))
    head = f"## {index}. {drawn.repo} {drawn.path}:{drawn.row} {drawn.code}\n\n"
    head += f"- message: {drawn.message}\n- fix: {drawn.fix['message']}\n"
    if drawn.note:
        head += f"- note: {drawn.note}\n"
    return head + "\n```diff\n" + diff + "```\n\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("GPULINT_CORPUS", "/work/corpus/dev")))
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args(argv)
    pool: list[Drawn] = []
    for repo in sorted(p.name for p in args.corpus.iterdir() if p.is_dir()):
        found = unsafe_fixes(args.corpus, repo)
        print(f"{repo}: {len(found)} unsafe fixes", file=sys.stderr, flush=True)
        pool.extend(found)
    pool.sort(key=lambda d: (d.repo, d.path, d.row, d.code))
    drawn = random.Random(args.seed).sample(pool, min(args.sample, len(pool)))
    print(f"# {len(drawn)} unsafe fixes drawn from {len(pool)} (seed {args.seed})\n")
    for index, item in enumerate(drawn, 1):
        sys.stdout.write(render(item, args.corpus, index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
