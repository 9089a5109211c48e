"""Extract the pinned commit of each repository in repos.toml into a local corpus directory.

    python bench/precision/prepare.py --git-dirs /path/to/clones --corpus ~/.cache/gpulint/corpus
    python bench/precision/prepare.py --git-dirs /path/to/clones --repos bench/precision/holdout.toml

`--git-dirs` holds one git directory (a clone, bare or not) per repository, named `owner+name`
or `name`, optionally with the clone under `owner+name/repo`. Only the files gpulint reads
(`.py`, `.pyi`, `.ipynb`, `.toml`, `.cfg`, and the `requirements*.txt` / `environment*.yml` files,
install scripts and Dockerfiles that pin torch) are written, as they are at the pinned commit; a
repository whose clone or commit is missing is skipped with a note. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import DEFAULT_CORPUS, Repo, load_repos  # noqa: E402

from gpulint.project.requirements import read_for_floor  # noqa: E402  (the files that pin torch)

SUFFIXES = (".py", ".pyi", ".ipynb", ".toml", ".cfg")


def git_dir(base: Path, repo: Repo) -> Optional[Path]:
    for name in (repo.slug, repo.name.split("/")[-1]):
        for candidate in (base / name / "repo" / ".git", base / name / "repo", base / name / ".git", base / name):
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate
    return None


def extract(git: Path, commit: str, target: Path) -> int:
    listing = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.split(b"\0")
    written = 0
    for entry in listing:
        if not entry:
            continue
        meta, raw_path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind != b"blob" or mode == b"120000" or not (path.endswith(SUFFIXES) or read_for_floor(path)):
            continue
        blob = subprocess.run(["git", f"--git-dir={git}", "cat-file", "blob", sha.decode()], capture_output=True)
        if blob.returncode != 0:
            continue  # a snapshot without large files
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(blob.stdout)
        written += 1
    return written


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dirs", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("GPULINT_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--repos", type=Path, default=HERE / "repos.toml", help="repos.toml or holdout.toml")
    args = parser.parse_args(argv)
    for repo in load_repos(args.repos):
        target = args.corpus.expanduser() / repo.slug
        if target.exists():
            print(f"{repo.name}: already in {target}")
            continue
        git = git_dir(args.git_dirs, repo)
        if git is None:
            print(f"{repo.name}: no clone under {args.git_dirs}; skipped")
            continue
        try:
            count = extract(git, repo.commit, target)
        except subprocess.CalledProcessError:
            print(f"{repo.name}: commit {repo.commit[:12]} not in {git}; skipped")
            continue
        print(f"{repo.name}: {count} files at {repo.commit[:12]} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
