"""Benchmark: what the garbage collector costs a cold whole-project `check -j1` (issue 25: GC growth).

A script, not a test. From the repository root, with the project's venv:

    python bench/gc_heap.py --files 1000 --runs 1

It writes the project bench/one_file.py writes (packages of a model, a dataset and a training script, and
copies of the shipped fixture scripts) and runs `check --no-cache --isolated -j1 --exit-zero .` on the
whole of it, alternating two ways in each round:

- `frozen`: this checkout: the heap that lives through the run (the project's facts) is frozen while
  the files are linted (cli/lint.py `_heap_frozen`);
- `walked`: the same with freezing switched off (`FREEZE_FROM` out of reach): the collector walks the
  project's facts again at every full collection;
- `off`: the collector disabled for the whole run, the floor (and the memory that costs).

For each: median CPU seconds (user + system, from `wait4`), the ratio to `off`, and the peak resident
memory. All three must print the same findings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from one_file import build  # the same project, built the same way

RUN = """
import atexit, gc, sys, time
import gpulint.cli.lint as lint
if sys.argv[1] == "walked":
    lint.FREEZE_FROM = 10**9
spent, started = [0.0], [0.0]
def timed(phase, info):
    if phase == "start":
        started[0] = time.process_time()
    else:
        spent[0] += time.process_time() - started[0]
gc.callbacks.append(timed)
atexit.register(lambda: print(f"gc-seconds {spent[0]:.3f}", file=sys.stderr))
from gpulint.cli import main
main(sys.argv[2:])
"""


def run(mode: str, root: Path) -> tuple[float, float, float, str]:
    """CPU seconds in the collector and in all, peak resident MiB of one run, and what it printed."""
    process = subprocess.Popen([sys.executable, "-c", RUN, mode, "check", "--no-cache", "--isolated", "-j", "1",
                                "--exit-zero", "--output-format", "concise", "."],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root)
    assert process.stdout is not None and process.stderr is not None
    out = process.stdout.read()
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"gpulint failed: {error.decode()}")
    collector = float(error.decode().rsplit("gc-seconds ", 1)[1].split()[0])
    return collector, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        build(Path(folder), args.files)
        count = sum(1 for _ in Path(folder).rglob("*.py"))
        print(f"project: {count} Python files; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        results: dict[str, list[tuple[float, float, float]]] = {"frozen": [], "walked": []}
        outputs = set()
        for _ in range(args.runs):
            for mode in results:
                collector, cpu, peak, out = run(mode, Path(folder))
                results[mode].append((collector, cpu, peak))
                outputs.add(out)
        if len(outputs) != 1:
            raise SystemExit("the runs printed different findings")
        for mode, runs in results.items():
            collector, cpu, peak = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{mode:7} collector {collector:6.2f} s of cpu {cpu:7.2f} s ({collector / cpu:5.1%})  "
                  f"peak {peak:5.0f} MiB")


if __name__ == "__main__":
    main()
