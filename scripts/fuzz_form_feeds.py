"""Fuzz form feeds into every fixture case, as issue 10 did (a script, not a test: a few minutes).

Each case gets 1-3 form feeds (alone, doubled, or next to a space) at the start of random lines,
indented ones included; files CPython rejects are skipped. Every other file is fixed with all of
its unsafe fixes and checked as tests/engine/test_properties_bytes.py checks: bytes outside the
edits unchanged, no form feed lost, fixing twice changes nothing. It counts internal errors,
invariant violations, and fixes withheld because of the form feeds.

    python scripts/fuzz_form_feeds.py 2838
"""

from __future__ import annotations

import ast
import collections
import random
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from gpulint.engine.linter import InternalError  # noqa: E402
from tests.engine import test_properties_bytes as properties  # noqa: E402


def main(count: int, seed: int = 10) -> dict[str, int]:
    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    cases = properties.all_cases()
    monkeypatch = pytest.MonkeyPatch()
    out: collections.Counter[str] = collections.Counter()
    for _ in range(count):
        case = rng.choice(cases)
        text = case.path.read_text(encoding="utf-8")
        lines = text.split("\n")
        for _ in range(rng.randint(1, 3)):
            index = rng.randrange(len(lines))
            lines[index] = rng.choice(["\f", " \f", "\f\f", "\f "]) + lines[index]
        hostile = "\n".join(lines)
        try:
            ast.parse(hostile)
        except (SyntaxError, ValueError):
            out["not valid Python (skipped)"] += 1
            continue
        out["valid"] += 1
        try:
            result = properties.check_invariant(hostile.encode(), case.settings, monkeypatch)
        except InternalError:
            out["INTERNAL ERROR"] += 1
            continue
        except AssertionError as exc:
            out["INVARIANT VIOLATION: " + str(exc).splitlines()[0][:60]] += 1
            continue
        out[result] += 1
        if result == "unchanged" and properties.check_invariant(text.encode(), case.settings, monkeypatch) == "fixed":
            out["unchanged, but fixed without the form feeds"] += 1
    return dict(out)


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2838))
