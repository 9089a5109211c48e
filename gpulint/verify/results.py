"""What a verify run produces, as plain data: the options it ran with and each script's result.

The session (session.py) fills these in; the report (report.py) renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from gpulint.verify.compare import Comparison
from gpulint.verify.events import RunRecord
from gpulint.verify.project import RewrittenFile
from gpulint.verify.rules import ToleranceChoice

PASS, FAIL, INCONCLUSIVE, SKIP, ERROR = "PASS", "FAIL", "INCONCLUSIVE", "SKIP", "ERROR"
EXERCISED, NOT_EXERCISED, NO_EFFECT, NOT_TRACKED = "exercised", "NOT EXERCISED", "no runtime effect", "not tracked"


@dataclass(frozen=True)
class VerifyOptions:
    paths: tuple[Path, ...]
    script_args: tuple[str, ...] = ()
    steps: int = 60
    warmup: int = 10
    device: str = "auto"
    select: Optional[tuple[str, ...]] = None
    preview: Optional[bool] = None
    json_path: Optional[Path] = None
    plot_path: Optional[Path] = None
    min_speedup: Optional[float] = None
    timeout: float = 600.0
    threads: Optional[int] = None
    seed: int = 0
    workdir: Optional[Path] = None  # keep rewrites, logs and events here (default: a temp folder, deleted)
    show_diff: bool = True
    repeats: int = 3  # timed runs of each script; 0: numerics only
    nproc: int = 1  # > 1: run through torchrun --nproc-per-node


@dataclass
class RuleStatus:
    code: str
    status: str  # EXERCISED, NOT_EXERCISED, NO_EFFECT or NOT_TRACKED
    detail: str

    def to_json(self) -> dict:
        return {"code": self.code, "status": self.status, "detail": self.detail}


@dataclass
class Plan:
    """One entry script, the files its verification rewrites, and how the runs must be set up."""

    script: Path
    root: Path
    files: list[RewrittenFile] = field(default_factory=list)  # entry first, then changed project modules
    sys_path: tuple[Path, ...] = ()
    nproc: int = 1  # processes under torchrun (1 with torchrun when the script needs its environment)
    torchrun: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class ScriptResult:
    path: str
    applied: tuple[str, ...] = ()
    files: list[RewrittenFile] = field(default_factory=list)
    diff: str = ""
    rewritten_path: Optional[str] = None  # kept only with --workdir
    tolerance: Optional[ToleranceChoice] = None
    original: Optional[RunRecord] = None  # checked runs
    rewritten: Optional[RunRecord] = None
    comparison: Optional[Comparison] = None
    rules: list[RuleStatus] = field(default_factory=list)
    passed: bool = False
    verdict: str = "PENDING"  # then PASS, FAIL, INCONCLUSIVE, SKIP (nothing to rewrite) or ERROR
    reasons: list[str] = field(default_factory=list)  # why it failed
    doubts: list[str] = field(default_factory=list)  # why it is inconclusive
    notes: list[str] = field(default_factory=list)
    isolation: dict[str, Any] = field(default_factory=dict)  # the user's files compared before and after
    steps: int = 0  # steps asked of each run (after adapting to this machine)
    warmup: int = 0
    repeats: int = 0
