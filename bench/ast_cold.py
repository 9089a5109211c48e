"""Cold `check -j1` CPU before and after rules moved to the `ast` detector API (issue 25), side by side.

Both sides run in the same session, interleaved, from their own source (`git archive` of the base into a
temporary folder, PYTHONPATH), cold (`--no-cache --isolated --preview -j1`), on the same files, once per
selection: the rules already on `ast` alone (where a text `check` never parses LibCST) and every rule the base
has (where LibCST still parses the files the other rules need). CPU is the child's user+sys time; the
median of the repeats is reported, and the ratio after/before.

    python bench/ast_cold.py --base main --repeat 3 fixtures examples
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def extract(revision: str, target: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def cpu_of(source: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `python -m gpulint ...` run from `source` (its own copy of the
    files: `-m` puts the working directory first on sys.path, ahead of PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=str(source))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gpulint", *args], cwd=source, env=env, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{source}: failed ({done.returncode}): {done.stderr.decode()[-1000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


# the lint phase alone, in one process per side: every file linted once (each file alone, no project pass),
# CPU time of `lint_text` summed; LibCST and the rules are imported before the clock starts
_LINT_PHASE = """
import sys, time
from pathlib import Path
from gpulint.core.settings import Settings
from gpulint.engine import linter
import libcst
select, paths = sys.argv[1], sys.argv[2:]
settings = Settings(select=tuple(select.split(",")), preview=True)
files = sorted(p for root in paths for p in Path(root).rglob("*.py"))
texts = [(f, f.read_text(encoding="utf-8", errors="replace")) for f in files]
linter.enabled_rules(settings)
kwargs = {"edits": False} if "edits" in linter.lint_text.__code__.co_varnames else {}
started = time.process_time()
for path, text in texts:
    linter.lint_text(path, text, settings, **kwargs)
print(time.process_time() - started)
"""


def lint_phase(source: Path, select: str, paths: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(source))
    done = subprocess.run([sys.executable, "-c", _LINT_PHASE, select, *paths], cwd=source, env=env,
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["fixtures", "examples"])
    parser.add_argument("--base", default="main")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ported", default="GPU102,GPU201", help="the rules on `ast` (comma-separated)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as tmp:
        base = extract(options.base, Path(tmp) / "base")
        # "all rules": every rule the base has (rules added since would make the sides differ in work)
        env = dict(os.environ, PYTHONPATH=str(base))
        codes = subprocess.run([sys.executable, "-c", "from gpulint.rules import all_rules; "
                                "print(','.join(r.code for r in all_rules() if r.code != 'GPU000'))"],
                               cwd=base, env=env, capture_output=True, text=True, check=True).stdout.strip()
        selections = {"rules on ast only": ["--select", options.ported], "all rules": ["--select", codes]}
        print(f"cold `check -j1 --no-cache --isolated --preview` of {' '.join(options.paths)}; base {options.base}, "
              f"median of {options.repeat}")
        print(f"{'selection':<20} {'before CPU s':>12} {'after CPU s':>12} {'after/before':>12}")
        for label, select in selections.items():
            args = ["check", "--no-cache", "--isolated", "--preview", "-j", "1", *select, *options.paths]
            times: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(options.repeat):  # interleaved: drift in the machine's load hits both sides
                times["before"].append(cpu_of(base, args)[0])
                times["after"].append(cpu_of(ROOT, args)[0])
            before, after = statistics.median(times["before"]), statistics.median(times["after"])
            print(f"{label:<20} {before:>12.2f} {after:>12.2f} {after / before:>12.2f}")
        print("the lint phase alone (`lint_text` CPU, text check, each file alone, imports done):")
        for label, select in selections.items():
            codes = select[1]
            phase: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(options.repeat):
                phase["before"].append(lint_phase(base, codes, options.paths))
                phase["after"].append(lint_phase(ROOT, codes, options.paths))
            before, after = statistics.median(phase["before"]), statistics.median(phase["after"])
            print(f"{label:<20} {before:>12.2f} {after:>12.2f} {after / before:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
