"""Do gpulint's fixes land in the project's style? ruff before and after `gpulint fix --unsafe-fixes`.

    python bench/fix_style.py --corpus /work/corpus/dev            # every repository of the corpus
    python bench/fix_style.py --corpus /work/corpus/dev --repos karpathy+nanoGPT,pytorch+examples

Each repository of the corpus (read-only) is copied to a temporary folder. There `ruff check
--select E,W,F,I` runs with the repository's own ruff configuration (ruff finds it from the
folder); a repository without one is checked at the line length its black or flake8
configuration sets, which is also the length gpulint wraps at (88 when none does). Then
`gpulint fix --unsafe-fixes` and ruff again. A finding is new when a file has more findings of
that code after the fixes than before; each is listed with its line. Every fixed `.py` file is
also compiled. The point: a user who runs our fixes and then their own ruff or CI sees only the
intended change. Nothing is timed.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
RUFF_SELECT = "E,W,F,I"
BLOCK_CODES = frozenset({"I001", "I002"})  # ruff reports these once per import block, at its first line


@dataclass
class RepoResult:
    name: str
    ruff_config: str  # where ruff's configuration came from
    files_fixed: int = 0
    fixes: int = 0
    before: int = 0
    after: int = 0
    new: list[str] = field(default_factory=list)  # "path:row CODE message | line"
    broken: list[str] = field(default_factory=list)  # fixed files that no longer compile
    error: str = ""


def ruff_config(repo: Path) -> Optional[str]:
    """The repository's own ruff configuration at its top, if any."""
    for name in ("ruff.toml", ".ruff.toml"):
        if (repo / name).is_file():
            return name
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return None
        if isinstance(data.get("tool"), dict) and "ruff" in data["tool"]:
            return "pyproject.toml [tool.ruff]"
    return None


def unpin_ruff(repo: Path) -> bool:
    """Drop a `required-version` pin from the copy's ruff configuration: the repository's settings still
    apply, checked by the ruff installed here."""
    changed = False
    for name in ("ruff.toml", ".ruff.toml", "pyproject.toml"):
        path = repo / name
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            kept = [line for line in lines if not re.match(r"\s*required-version\s*=", line)]
            if kept != lines:
                path.write_text("".join(kept), encoding="utf-8")
                changed = True
    return changed


def other_line_length(repo: Path) -> tuple[Optional[int], str]:
    """The line length black or flake8 is configured with, where ruff has no configuration."""
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            black = data.get("tool", {}).get("black", {})
            if isinstance(black.get("line-length"), int):
                return black["line-length"], "pyproject.toml [tool.black]"
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, AttributeError):
            pass
    setup_cfg = repo / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(setup_cfg, encoding="utf-8")
            for section in ("flake8", "pycodestyle"):
                if parser.has_option(section, "max-line-length"):
                    return int(parser.get(section, "max-line-length")), f"setup.cfg [{section}]"
        except (configparser.Error, ValueError, UnicodeDecodeError):
            pass
    return None, "none (ruff's default 88)"


def run_ruff(folder: Path, extra: list[str]) -> tuple[list[dict], str]:
    command = ["ruff", "check", "--select", RUFF_SELECT, "--output-format", "json", "--exit-zero", "--no-cache",
               *extra, "."]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        return [], done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"ruff exit {done.returncode}"
    return json.loads(done.stdout or "[]"), ""


def _row_map(old: bytes, new: bytes) -> dict[int, int]:
    """New row -> old row for the lines the fixes left as they were."""
    old_lines = old.decode("utf-8", "replace").splitlines()
    new_lines = new.decode("utf-8", "replace").splitlines()
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mapping[block.b + k + 1] = block.a + k + 1
    return mapping


def new_findings(before: list[dict], after: list[dict], folder: Path, old: dict[str, bytes],
                 new: dict[str, bytes]) -> list[dict]:
    """The findings after fixing that no finding before accounts for.

    In a `.py` file a finding on a line the fixes left unchanged is matched with the same code on
    that line before; a finding on a changed line is new unless the file had as many of that code
    before on lines that changed too (a long line that grew is still one E501). Notebooks, whose
    rows ruff counts per cell, are compared by count per code.
    """
    def path(item: dict) -> str:
        return os.path.relpath(item["filename"], folder)

    out: list[dict] = []
    files = sorted({path(i) for i in after})
    for name in files:
        was = [i for i in before if path(i) == name]
        now = [i for i in after if path(i) == name]
        if old.get(name) == new.get(name):
            continue  # a file no fix touched cannot have new findings
        if not name.endswith(".py"):
            counts = Counter(i["code"] for i in was)
            for item in now:
                if counts[item["code"]] > 0:
                    counts[item["code"]] -= 1
                else:
                    out.append(item)
            continue
        mapping = _row_map(old.get(name, b""), new.get(name, b""))
        kept_rows = set(mapping.values())
        unmatched = Counter((i["code"], i["location"]["row"]) for i in was)
        changed_before = Counter(i["code"] for i in was if i["location"]["row"] not in kept_rows)
        blocks = Counter(i["code"] for i in was if i["code"] in BLOCK_CODES)
        for item in sorted(now, key=lambda i: i["location"]["row"]):
            row = item["location"]["row"]
            code = item["code"] or "E999"
            if code in BLOCK_CODES:  # one per import block, reported on its first line: matched by count
                if blocks[code] > 0:
                    blocks[code] -= 1
                else:
                    out.append(item)
                continue
            if row in mapping and unmatched[(code, mapping[row])] > 0:
                unmatched[(code, mapping[row])] -= 1
            elif row not in mapping and changed_before[code] > 0:
                changed_before[code] -= 1
            else:
                out.append(item)
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    out = {}
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".ipynb"):
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


def measure(source: Path, work: Path, gpulint_root: Optional[Path] = None) -> RepoResult:
    copy = work / source.name
    shutil.copytree(source, copy, symlinks=True)
    unpinned = unpin_ruff(copy)
    own = ruff_config(copy)
    extra: list[str] = []
    if own is None:
        length, where = other_line_length(copy)
        if length is not None:
            extra = ["--line-length", str(length)]
        result = RepoResult(source.name, f"none; line length from {where}")
    else:
        result = RepoResult(source.name, own + (" (its required-version pin dropped)" if unpinned else ""))
    before, error = run_ruff(copy, extra)
    if error:  # a configuration this ruff cannot read: judge with ruff's defaults instead
        result.ruff_config += f" (unreadable by this ruff: {error}; ruff defaults used)"
        extra = ["--isolated"]
        before, error = run_ruff(copy, extra)
    if error:
        result.error = error
        return result
    old = snapshot(copy)
    env = dict(os.environ)
    if gpulint_root is not None:  # another checkout's gpulint (a baseline), imported ahead of the installed one
        env["PYTHONPATH"] = str(gpulint_root) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-m", "gpulint", "fix", "--unsafe-fixes", "--no-cache", "--exit-zero",
                           "."], cwd=copy, capture_output=True, text=True, env=env)
    if done.returncode not in (0, 1):
        result.error = f"gpulint exit {done.returncode}: {done.stderr.strip()[-300:]}"
    for line in (done.stdout + done.stderr).splitlines():
        if line.startswith("Fixed ") and line.split()[1].isdigit():
            result.fixes = int(line.split()[1])
    new = snapshot(copy)
    changed = [name for name in new if old.get(name) != new[name]]
    result.files_fixed = len(changed)
    for name in changed:
        if name.endswith(".py"):
            try:
                ast.parse(new[name])
            except SyntaxError as exc:
                result.broken.append(f"{name}: {exc}")
    after, error = run_ruff(copy, extra)
    if error:
        result.error = error
        return result
    result.before, result.after = len(before), len(after)
    for item in new_findings(before, after, copy, old, new):
        row = item["location"]["row"]
        name = os.path.relpath(item["filename"], copy)
        text = ""
        if name.endswith(".py"):
            lines = new[name].decode("utf-8", "replace").splitlines()
            text = lines[row - 1].strip() if row - 1 < len(lines) else ""
        result.new.append(f"{name}:{row} {item['code']} {item['message']} | {text}")
    return result


def markdown(results: list[RepoResult]) -> str:
    lines = ["| repository | ruff configuration | files fixed | fixes | ruff before | after | new |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.name} | {r.ruff_config} | {r.files_fixed} | {r.fixes} | {r.before} | {r.after} | "
                     f"{len(r.new)} |")
    total_new = sum(len(r.new) for r in results)
    lines.append(f"| **all {len(results)}** | | {sum(r.files_fixed for r in results)} | "
                 f"{sum(r.fixes for r in results)} | {sum(r.before for r in results)} | "
                 f"{sum(r.after for r in results)} | **{total_new}** |")
    for r in results:
        for item in r.new:
            lines.append(f"- new in {r.name}: `{item}`")
        for item in r.broken:
            lines.append(f"- does not compile in {r.name}: {item}")
        if r.error:
            lines.append(f"- {r.name}: {r.error}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("GPULINT_CORPUS", "/work/corpus/dev")))
    parser.add_argument("--repos", help="comma-separated corpus folders (default: all)")
    parser.add_argument("--keep", type=Path, help="keep the fixed copies here (default: a temporary folder)")
    parser.add_argument("--gpulint", type=Path, help="the checkout whose gpulint fixes (default: the installed one)")
    args = parser.parse_args(argv)
    names = args.repos.split(",") if args.repos else sorted(p.name for p in args.corpus.iterdir() if p.is_dir())
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpulint-style-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for name in names:
            result = measure(args.corpus / name, work, args.gpulint)
            print(f"{name}: {result.fixes} fixes in {result.files_fixed} files, {len(result.new)} new ruff findings"
                  + (f", {len(result.broken)} broken" if result.broken else "")
                  + (f" ({result.error})" if result.error else ""), file=sys.stderr, flush=True)
            results.append(result)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(markdown(results))
    return 1 if any(r.new or r.broken or r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
