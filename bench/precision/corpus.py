"""The precision corpus: pinned repositories, verdicts read by hand, and the sample for recall.

- `repos.toml`: the repositories and the commit that was read.
- `labels.tsv`: one verdict per finding: repository, `path:row`, code, TP or FP, and the reason
  (a one-line reading of the code; no third-party code is copied here).
- `recall.tsv`: instances a rule should report, found by reading a sample of files: repository,
  `path:row`, code, note. Recall is the share of them gpulint reports.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = "~/.cache/gpulint/corpus"
# TP: right, and the advice pays off for this code. NP: what it says is true, but the advice cannot pay
# off here (toy scale, a copy that stays synchronous, an API the pinned torch lacks): a false positive
# by the strict rubric, right by the lenient one. FP: wrong.
VERDICTS = ("TP", "NP", "FP")


@dataclass(frozen=True)
class Repo:
    name: str  # owner/name
    commit: str

    @property
    def slug(self) -> str:
        """The corpus folder: `owner+name`."""
        return self.name.replace("/", "+")


@dataclass(frozen=True)
class Key:
    repo: str  # slug
    location: str  # path:row, the path relative to the repository
    code: str


@dataclass(frozen=True)
class Label:
    key: Key
    verdict: str
    reason: str


def load_repos(path: Path = HERE / "repos.toml") -> list[Repo]:
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    return [Repo(str(r["name"]), str(r["commit"])) for r in data["repo"]]


def _rows(path: Path) -> Iterable[list[str]]:
    if not path.exists():
        return
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) < 4:
            raise ValueError(f"{path}:{number}: expected tab-separated cells, got {line!r}")
        yield cells


def load_labels(path: Path = HERE / "labels.tsv") -> dict[Key, Label]:
    labels: dict[Key, Label] = {}
    for cells in _rows(path):
        repo, location, code, verdict = cells[:4]
        reason = cells[4] if len(cells) > 4 else ""
        if verdict not in VERDICTS:
            raise ValueError(f"{path}: verdict must be TP, NP or FP, got {verdict!r} for {repo} {location}")
        if verdict in ("FP", "NP") and not reason.strip():
            raise ValueError(f"{path}: a false positive needs its reason: {repo} {location} {code}")
        key = Key(repo, location, code)
        labels[key] = Label(key, verdict, reason)
    return labels


def load_recall(path: Path = HERE / "recall.tsv") -> list[tuple[Key, str]]:
    return [(Key(c[0], c[1], c[2]), c[3]) for c in _rows(path)]


def finding_key(repo: str, filename: str, row: int, code: str, corpus: Path,
                cell: Optional[int] = None) -> Optional[Key]:
    """The label key of a finding whose `filename` lies in `corpus/repo` (a notebook's names its cell)."""
    base = (corpus / repo).resolve()
    try:
        relative = Path(filename).resolve().relative_to(base).as_posix()
    except ValueError:
        return None
    where = f"{relative}:{row}" if cell is None else f"{relative}:cell {cell}:{row}"
    return Key(repo, where, code)
