"""Findings before and after a change, compared exactly (issue 25: a rule ported to `ast` must find the same).

The base is a git revision, extracted with `git archive` into a temporary folder; both sides run
`python -m gpulint` from their own source (PYTHONPATH), cold (`--no-cache --isolated --preview`), on the same
files: fixtures/, examples/, tests/ and a fixed sample of the installed torch package (as
tests/engine/test_corpus.py picks it). Each side gives `check --output-format json` (built fixes, with edits)
and `concise` (predicted fixes), and every fixture linted with its own settings (the `# gpulint-test:` header),
fixes included. Prints one line per comparison; exit 1 on any difference.

    python scripts/compare_findings.py --base main --select GPU201
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE, SEED = 150, 7  # tests/engine/test_corpus.py's sample of torch's own sources
WITH_FIXES = (
    "testing/_internal/common_quantization.py",
    "testing/_internal/distributed/distributed_test.py",
    "testing/_internal/distributed/rpc/examples/parameter_server_test.py",
    "testing/_internal/distributed/rpc/examples/reinforcement_learning_rpc_test.py",
)

# every fixture's findings with its own settings, fixes and edits included (run inside each side's source)
_FIXTURES = """
import json, sys
from pathlib import Path
from gpulint.engine.linter import lint_text
from tests.fixture_cases import all_cases
codes = set(sys.argv[1].split(","))
out = {}
for case in all_cases():
    text = case.path.read_text(encoding="utf-8")
    for edits in (True, False):
        try:
            found = lint_text(case.path, text, case.settings, edits=edits).findings
        except TypeError:  # a base without the `edits` parameter builds every fix
            found = lint_text(case.path, text, case.settings).findings
        key = f"{case.path.relative_to(Path.cwd())}:{'edits' if edits else 'predicted'}"
        rows = [dict(f.to_dict(), path=str(case.path.relative_to(Path.cwd()))) for f in found if f.code in codes]
        if not edits:  # a prediction carries no edits: compare what `check` shows
            for row in rows:
                if row["fix"] is not None:
                    row["fix"]["edits"] = []
        out[key] = rows
print(json.dumps(out, sort_keys=True))
"""


def torch_sample(target: Path) -> list[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return []
    root = Path(spec.origin).parent
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    chosen = set(random.Random(SEED).sample(files, min(SAMPLE, len(files))))
    chosen |= {root / name for name in WITH_FIXES if (root / name).is_file()}
    out = []
    for src in sorted(chosen):
        dst = target / src.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def extract(revision: str, target: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run(source: Path, args: list[str], cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(source), PYTHONHASHSEED="0")
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{source}: {' '.join(args[:4])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def side(source: Path, select: str, corpus: Path, jobs: int) -> dict[str, object]:
    check = ["-m", "gpulint", "check", "--no-cache", "--isolated", "--preview", "--select", select, "-j", str(jobs)]
    paths = ["fixtures", "examples", "tests", str(corpus)]
    out: dict[str, object] = {}
    for fmt in ("json", "concise"):
        text = run(source, [*check, "--output-format", fmt, *paths], source)
        out[fmt] = json.loads(text) if fmt == "json" else sorted(text.splitlines())
    out["fixtures"] = json.loads(run(source, ["-c", _FIXTURES, select], source))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    parser.add_argument("--select", default="GPU201", help="rule codes, comma-separated")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpulint-compare-") as tmp:
        work = Path(tmp)
        corpus = work / "torch-sample"
        sample = torch_sample(corpus)
        base = extract(options.base, work / "base")
        before = side(base, options.select, corpus, options.jobs)
        after = side(ROOT, options.select, corpus, options.jobs)
    same = True
    for key in ("json", "concise", "fixtures"):
        a, b = before[key], after[key]
        count = len(a) if isinstance(a, list) else sum(len(v) for v in a.values())  # type: ignore[union-attr]
        if a == b:
            print(f"{key}: identical ({count} {'findings' if key != 'fixtures' else 'fixture findings'})")
            continue
        same = False
        print(f"{key}: DIFFERENT")
        if isinstance(a, list) and isinstance(b, list):
            removed = [x for x in a if x not in b]
            added = [x for x in b if x not in a]
            for item in removed[:10]:
                print("  - " + (json.dumps(item) if not isinstance(item, str) else item))
            for item in added[:10]:
                print("  + " + (json.dumps(item) if not isinstance(item, str) else item))
        elif isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    print(f"  {name}:\n    before {json.dumps(a.get(name))[:600]}")
                    print(f"    after  {json.dumps(b.get(name))[:600]}")
    print(f"(base {options.base}; {len(sample)} torch files; select {options.select})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
