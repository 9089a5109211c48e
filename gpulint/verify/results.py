"""What a verify run produces, as plain data: the options it ran with and each script's result.

The session (session.py) fills these in; the report (report.py) renders them.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any, Optional

from gpulint.records import dataclass
from gpulint.verify.compare import Comparison
from gpulint.verify.events import RunRecord
from gpulint.verify.project import RewrittenFile
from gpulint.verify.rules import ToleranceChoice

PASS, FAIL, INCONCLUSIVE, SKIP, ERROR = "PASS", "FAIL", "INCONCLUSIVE", "SKIP", "ERROR"
EXERCISED, NOT_EXERCISED, NO_EFFECT, NOT_TRACKED = "exercised", "NOT EXERCISED", "no runtime effect", "not tracked"
PARTLY_EXERCISED = "PARTLY EXERCISED"  # some of the rule's edits ran in the timed steps, not all


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
    noise_runs: int = 1  # perturbed runs of the original for the noise floor, when a deviation needs one; 0: none
    noise: str = "auto"  # "auto": measure the noise floor when the rule's own tolerance is exceeded; "always"
    float16: str = "auto"  # float16 autocast on a CPU: "native", "bfloat16" (emulation + range probe), "auto"
    blame: bool = True  # on FAIL with several rules, rerun with subsets to name the rule that causes it


@dataclass
class EditStatus:
    where: str  # the finding's file:line in the user's file
    text: str  # the rewritten line
    exercised: bool
    detail: str

    def to_json(self) -> dict:
        return {"where": self.where, "text": self.text, "exercised": self.exercised, "detail": self.detail}


@dataclass
class RuleStatus:
    code: str
    status: str  # EXERCISED, PARTLY_EXERCISED, NOT_EXERCISED, NO_EFFECT or NOT_TRACKED
    detail: str
    edits: list[EditStatus] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"code": self.code, "status": self.status, "detail": self.detail,
                "edits": [e.to_json() for e in self.edits]}


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
    reasons: list[str] = field(default_factory=list)  # why it failed, the verdict's own reason first
    doubts: list[str] = field(default_factory=list)  # why it is inconclusive
    warnings: list[str] = field(default_factory=list)  # predicted problems (float16 underflow): never a PASS
    changes: list[str] = field(default_factory=list)  # behaviour the rewrite changes on purpose, named
    change_kinds: list[str] = field(default_factory=list)  # RANDOM_STREAMS / TRAINED_PARAMETERS, as in `changes`
    uncovered: list[str] = field(default_factory=list)  # edits this verdict does not cover (they never ran)
    blame: list[str] = field(default_factory=list)  # what the subset reruns found
    reference: str = ""  # what the rewrite was compared with, when not the original as it is
    float16: dict[str, Any] = field(default_factory=dict)  # how float16 regions ran and what the probe found
    exceptions: list[str] = field(default_factory=list)  # exceptions inside the steps, one line each
    noise_records: list[RunRecord] = field(default_factory=list)  # the perturbed runs behind the noise floor
    extra_runs: dict[str, RunRecord] = field(default_factory=dict)  # reference and blame runs, by label
    notes: list[str] = field(default_factory=list)
    isolation: dict[str, Any] = field(default_factory=dict)  # the user's files compared before and after
    steps: int = 0  # steps asked of each run (after adapting to this machine)
    warmup: int = 0
    repeats: int = 0

    @property
    def verdict_reason(self) -> str:
        """The one reason the verdict line gives."""
        if self.verdict in ("FAIL", "ERROR") and self.reasons:
            return self.reasons[0]
        if self.verdict == "INCONCLUSIVE":
            return (self.warnings + self.doubts or [""])[0]
        return ""
