"""Run gpulint over the corpus repositories present locally and score its findings.

    python bench/precision/run.py                      # lint, then print the tables
    python bench/precision/run.py --write              # also rewrite the tables in RESULTS.md
    python bench/precision/run.py --holdout --write    # the hold-out repositories' tables
    python bench/precision/run.py --unlabelled         # list findings that have no verdict yet
    python bench/precision/run.py --gpulint ../old     # score another checkout (for recall today)
    python bench/precision/run.py --blind --write      # the blind hold-out (blind.toml, blind-labels.tsv)
    python bench/precision/run.py --set blind3 --write # any named set: blind3.toml, blind3-labels.tsv,
                                                       # blind3-recall.tsv; RESULTS.md blocks BLIND3-*
    git worktree add /tmp/frozen f1a9263 && python bench/precision/run.py --blind --gpulint /tmp/frozen \
        --block-prefix BLIND-FIRST- --write            # its first reading: the rules as they were frozen
    python bench/precision/run.py --set blind3 --gpulint /work/wt/frozen --block-prefix BLIND3-FIRST- --write

Each repository present in the corpus directory (`--corpus`, env GPULINT_CORPUS, default
~/.cache/gpulint/corpus; see prepare.py) is linted cold (`--no-cache --preview`, every rule
including preview ones, with the torch floor the repository declares; `--isolated` reads none),
its findings are joined with labels.tsv, and recall is measured on recall.tsv. Verdicts are TP,
NP (true, but the advice cannot pay off here) or FP; the tables give strict precision (NP counts
as wrong) and lenient (NP counts as right). Absent repositories are skipped; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from corpus import DEFAULT_CORPUS, Key, Label, Repo, finding_key, load_labels, load_recall, load_repos  # noqa: E402

STABLE = ("GPU001", "GPU002", "GPU003", "GPU101", "GPU102", "GPU201", "GPU302")
PREVIEW = ("GPU301",)
_PROJECT = re.compile(r"gpulint profile: ([\d.]+) s finding files and configuration, ([\d.]+) s project pass")
_WALL = re.compile(r"gpulint profile: ([\d.]+) s wall, (\d+) workers?; "
                   r"times below are summed over files \(([\d.]+) s\)")
_PHASE = re.compile(r"^\s+(parse|analysis|rules|placing|prefilter)\s+([\d.]+)", re.MULTILINE)


@dataclass
class RepoRun:
    repo: Repo
    findings: list[tuple[Key, str]] = field(default_factory=list)  # (key, message)
    files: int = 0
    wall_s: float = 0.0
    project_s: float = 0.0
    lint_cpu_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    error: str = ""


def lint(repo: Repo, corpus: Path, gpulint_path: Path, isolated: bool = False) -> RepoRun:
    """Lint one repository as its users would: with the torch floor its own metadata and requirement
    files declare (`--isolated` reads none of them)."""
    run = RepoRun(repo)
    env = dict(os.environ, PYTHONPATH=str(gpulint_path))
    command = [sys.executable, "-m", "gpulint", "check", "--preview", "--no-cache", "--exit-zero",
               "--output-format", "json", "--profile", repo.slug]
    if isolated:
        command.insert(4, "--isolated")
    started = time.perf_counter()
    result = subprocess.run(command, cwd=corpus, env=env, capture_output=True, text=True)
    run.wall_s = time.perf_counter() - started
    if result.returncode != 0:
        run.error = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        return run
    for item in json.loads(result.stdout or "[]"):
        key = finding_key(repo.slug, item["filename"], item["location"]["row"], item["code"], corpus,
                          item.get("cell"))
        if key is not None:
            run.findings.append((key, item["message"]))
    project = _PROJECT.search(result.stderr)
    if project:
        run.project_s = float(project.group(2))
    wall = _WALL.search(result.stderr)
    if wall:
        run.lint_cpu_s = float(wall.group(3))
    run.phases = {name: float(seconds) for name, seconds in _PHASE.findall(result.stderr)}
    files = re.search(r"files: (\d+) linted", result.stderr)
    run.files = int(files.group(1)) if files else 0
    return run


def saved(repo: Repo, out: Path) -> RepoRun:
    """The findings a previous run wrote to `out` for this repository (`--rescore`)."""
    run = RepoRun(repo)
    for item in json.loads((out / f"{repo.slug}.json").read_text(encoding="utf-8")):
        run.findings.append((Key(*item["key"]), item["message"]))
    return run


def present(repos: Sequence[Repo], corpus: Path) -> list[Repo]:
    return [r for r in repos if (corpus / r.slug).is_dir()]


# ---------------------------------------------------------------------------------------------
# scoring

def precision_table(runs: Sequence[RepoRun], labels: dict[Key, Label]) -> tuple[str, dict[str, Counter]]:
    """Markdown: findings / TP / FP per repository and rule, then the totals with precision."""
    codes = STABLE + PREVIEW
    totals: dict[str, Counter] = defaultdict(Counter)
    lines = ["| repository | " + " | ".join(codes) + " |", "|---|" + "---:|" * len(codes)]
    for run in runs:
        cells = []
        for code in codes:
            keys = [k for k, _ in run.findings if k.code == code]
            counts = Counter(labels[k].verdict if k in labels else "unlabelled" for k in keys)
            totals[code].update(counts)
            totals[code]["findings"] += len(keys)
            if not keys:
                cells.append("")
            else:
                cell = f"{len(keys)}: {counts['TP']} TP"
                if counts["NP"]:
                    cell += f", **{counts['NP']} NP**"
                if counts["FP"]:
                    cell += f", **{counts['FP']} FP**"
                if counts["unlabelled"]:
                    cell += f", {counts['unlabelled']} ?"
                cells.append(cell)
        lines.append(f"| {run.repo.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines), totals


def recall_of(runs: Sequence[RepoRun], recall: Sequence[tuple[Key, str]]) -> dict[str, tuple[int, int]]:
    found_keys = {k for run in runs for k, _ in run.findings}
    scanned = {run.repo.slug for run in runs}
    out: dict[str, tuple[int, int]] = {}
    for code in STABLE + PREVIEW:
        sample = [k for k, _ in recall if k.code == code and k.repo in scanned]
        out[code] = (sum(1 for k in sample if k in found_keys), len(sample))
    return out


def precisions(counts: Counter) -> tuple[str, str]:
    """(strict, lenient) precision: strict counts advice that cannot pay off here (NP) as wrong, lenient as right."""
    labelled = counts["TP"] + counts["NP"] + counts["FP"]
    if not labelled:
        return "-", "-"
    return (f"{100 * counts['TP'] / labelled:.1f} %", f"{100 * (counts['TP'] + counts['NP']) / labelled:.1f} %")


def summary_table(totals: dict[str, Counter], recall: Optional[dict[str, tuple[int, int]]],
                  baseline: Optional[dict[str, tuple[int, int]]] = None) -> str:
    """Per rule: findings, verdicts, strict and lenient precision; recall columns only when a recall
    sample was measured."""
    head = "| rule | status | findings | TP | NP | FP | strict | lenient |"
    rule = "|---|---|---:|---:|---:|---:|---:|---:|"
    if recall is None:
        lines = [head, rule]
        for code in STABLE + PREVIEW:
            counts = totals.get(code, Counter())
            strict, lenient = precisions(counts)
            lines.append(f"| {code} | {'preview' if code in PREVIEW else 'stable'} | {counts['findings']} | "
                         f"{counts['TP']} | {counts['NP']} | {counts['FP']} | {strict} | {lenient} |")
        everything = sum(totals.values(), Counter())
        strict, lenient = precisions(everything)
        lines.append(f"| **all** | | {everything['findings']} | {everything['TP']} | {everything['NP']} | "
                     f"{everything['FP']} | **{strict}** | {lenient} |")
        return "\n".join(lines)
    lines = [head + " recall (sample) |" + (" recall before |" if baseline else ""),
             rule + "---:|" + ("---:|" if baseline else "")]
    for code in STABLE + PREVIEW:
        counts = totals.get(code, Counter())
        strict, lenient = precisions(counts)
        found, sample = recall.get(code, (0, 0))
        row = (f"| {code} | {'preview' if code in PREVIEW else 'stable'} | {counts['findings']} | {counts['TP']} | "
               f"{counts['NP']} | {counts['FP']} | {strict} | {lenient} | {found}/{sample}"
               + (f" ({100 * found / sample:.0f} %)" if sample else "") + " |")
        if baseline:
            b_found, b_sample = baseline.get(code, (0, 0))
            row += f" {b_found}/{b_sample} |"
        lines.append(row)
    return "\n".join(lines)


def timing_table(runs: Sequence[RepoRun]) -> str:
    lines = ["| repository | files | wall | project pass | parse (ast + LibCST) | rules and analysis |",
             "|---|---:|---:|---:|---:|---:|"]
    total = Counter()
    for run in runs:
        parse = run.phases.get("parse", 0.0)
        rest = sum(run.phases.get(p, 0.0) for p in ("analysis", "rules", "placing"))
        lines.append(f"| {run.repo.name} | {run.files} | {run.wall_s:.2f} s | {run.project_s:.2f} s | "
                     f"{parse:.2f} s | {rest:.2f} s |")
        total.update({"files": run.files, "wall": run.wall_s, "project": run.project_s, "parse": parse,
                      "rest": rest})
    lines.append(f"| **all** | {total['files']} | {total['wall']:.1f} s | {total['project']:.1f} s | "
                 f"{total['parse']:.1f} s | {total['rest']:.1f} s |")
    return "\n".join(lines)


def false_positive_list(runs: Sequence[RepoRun], labels: dict[Key, Label]) -> str:
    lines = []
    for run in runs:
        for key, _ in run.findings:
            label = labels.get(key)
            if label is not None and label.verdict in ("FP", "NP"):
                lines.append(f"- {key.code} `{run.repo.name}/{key.location}` ({label.verdict}): {label.reason}")
    return "\n".join(lines) if lines else "(none)"


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:BEGIN -->", f"<!-- {name}:END -->"
    if begin not in text:
        return text + f"\n{begin}\n{body}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("GPULINT_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--gpulint", type=Path, default=ROOT, help="checkout whose gpulint to run (PYTHONPATH)")
    parser.add_argument("--baseline", type=Path, default=None, help="also measure recall of this checkout")
    parser.add_argument("--only", nargs="*", default=None, help="repository slugs to run (default: all present)")
    parser.add_argument("--write", action="store_true", help="rewrite the generated tables in RESULTS.md")
    parser.add_argument("--unlabelled", action="store_true", help="list findings without a verdict")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / ".work" / "precision")
    parser.add_argument("--repos", type=Path, default=HERE / "repos.toml")
    parser.add_argument("--labels", type=Path, default=HERE / "labels.tsv")
    parser.add_argument("--recall", type=Path, default=HERE / "recall.tsv")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--holdout", action="store_true",
                        help="lint the hold-out repositories (holdout.toml) and write their HOLDOUT-* blocks")
    parser.add_argument("--blind", action="store_true",
                        help="lint the blind hold-out (blind.toml, blind-labels.tsv); write its BLIND-* blocks")
    parser.add_argument("--set", dest="set_name", default=None, metavar="NAME",
                        help="lint a named set of repositories: NAME.toml, NAME-labels.tsv and NAME-recall.tsv "
                             "(in --set-dir); write its NAME-* blocks (upper case) in RESULTS.md")
    parser.add_argument("--set-dir", type=Path, default=HERE, help="where --set finds its files")
    parser.add_argument("--block-prefix", default=None,
                        help="name of the RESULTS.md blocks to write (BLIND-FIRST- for the first reading at the "
                             "frozen commit, run with --gpulint on a checkout of it)")
    parser.add_argument("--rescore", action="store_true",
                        help="score the findings a previous run saved under --out again (after new verdicts) "
                             "instead of linting; the TIMING block is left as it is")
    parser.add_argument("--isolated", action="store_true",
                        help="read no project file (no torch floor from the repositories' metadata)")
    args = parser.parse_args(argv)
    if args.holdout and args.repos == HERE / "repos.toml":
        args.repos = HERE / "holdout.toml"
    if args.blind and args.set_name is None:
        args.set_name, args.set_dir = "blind", HERE
    if args.set_name is not None:
        # a named set's files sit side by side; an explicit --repos/--labels/--recall still wins
        if args.repos == HERE / "repos.toml":
            args.repos = args.set_dir / f"{args.set_name}.toml"
        if args.labels == HERE / "labels.tsv":
            args.labels = args.set_dir / f"{args.set_name}-labels.tsv"
        if args.recall == HERE / "recall.tsv":
            args.recall = args.set_dir / f"{args.set_name}-recall.tsv"
    named = args.set_name is not None
    prefix = "HOLDOUT-" if args.holdout else f"{args.set_name.upper()}-" if named else ""
    if args.block_prefix is not None:
        prefix = args.block_prefix
    corpus = args.corpus.expanduser()
    repos = present(load_repos(args.repos), corpus)
    if args.only:
        repos = [r for r in repos if r.slug in args.only or r.name in args.only]
    if not repos:
        print(f"no corpus repository under {corpus}: run prepare.py first")
        return 0
    labels, recall = load_labels(args.labels), load_recall(args.recall)
    if args.rescore:
        runs = [saved(repo, args.out) for repo in repos]
        if args.baseline is not None:
            parser.error("--rescore scores saved findings: it cannot lint a --baseline")
    else:
        runs = [lint(repo, corpus, args.gpulint, args.isolated) for repo in repos]
    args.out.mkdir(parents=True, exist_ok=True)
    for run in runs:
        if run.error:
            print(f"{run.repo.name}: gpulint failed: {run.error}", file=sys.stderr)
        (args.out / f"{run.repo.slug}.json").write_text(
            json.dumps([{"key": [k.repo, k.location, k.code], "message": m} for k, m in run.findings], indent=1))
    table, totals = precision_table(runs, labels)
    measured = recall_of(runs, recall)
    baseline = None
    if args.baseline is not None:
        baseline = recall_of([lint(repo, corpus, args.baseline, args.isolated) for repo in repos], recall)
    summary = summary_table(totals, None if args.holdout else measured, baseline)
    print(summary + "\n\n" + table + "\n\n" + timing_table(runs))
    if args.unlabelled:
        for run in runs:
            for key, message in run.findings:
                if key not in labels:
                    print(f"{key.repo}\t{key.location}\t{key.code}\t?\t{message[:90]}")
    failed = [run.repo.name for run in runs if run.error]
    if failed:
        # a crash reads as "no findings" in every table: never score or write it (a merge once broke every file)
        print(f"gpulint failed on {len(failed)} repositories ({', '.join(failed)}): nothing written", file=sys.stderr)
        return 2
    if args.write:
        results = args.results
        text = results.read_text(encoding="utf-8") if results.exists() else "# Precision on real code\n"
        text = replace_block(text, prefix + "SUMMARY", summary)
        text = replace_block(text, prefix + "PER-REPOSITORY", table)
        if not args.holdout and not named and not args.rescore:
            text = replace_block(text, "TIMING", timing_table(runs))
        text = replace_block(text, prefix + "FALSE-POSITIVES", false_positive_list(runs, labels))
        results.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
