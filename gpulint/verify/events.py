"""The harness's record of one run, written as JSON lines so a killed run still leaves its steps.

Written by the harness subprocess (one file per rank under torchrun), read by the parent; no
torch here.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, field
from pathlib import Path
from typing import Any, Optional

from gpulint.records import dataclass

# how a run ended
STOPPED = "stopped"  # reached --steps; the harness ended the run
FINISHED = "finished"  # the script returned (or exited 0) before --steps
CRASHED = "crashed"  # the script raised
NO_BACKWARD = "no-backward"  # the script ended without ever calling backward()
NO_STEP = "no-step"  # backward() was called but no torch optimizer ever stepped
ERROR = "error"  # the harness could not run the script (bad device request, missing file)
TIMEOUT = "timeout"  # set by the parent: killed after --timeout seconds
DIED = "died"  # set by the parent: the process ended without a final record (signal, out of memory)

COMPLETED = frozenset({STOPPED, FINISHED})
STATUS_WORDS = {
    STOPPED: "reached --steps",
    FINISHED: "ended by itself",
    CRASHED: "crashed",
    NO_BACKWARD: "never called backward()",
    NO_STEP: "no optimizer step",
    ERROR: "could not start",
    TIMEOUT: "timed out",
    DIED: "died",
}
SEVERITY = [STOPPED, FINISHED, NO_STEP, NO_BACKWARD, CRASHED, TIMEOUT, DIED, ERROR]  # worst last

PHASE_WARMUP, PHASE_TIMED = "warmup", "timed"


@dataclass
class StepRecord:
    step: int  # 1-based
    loss: float  # unscaled; mean of the step's losses when it ran several backward passes
    time_s: Optional[float]  # wall time since the previous step boundary; None for the first step
    saved_bytes: Optional[int] = None  # bytes saved for backward (CPU measurement), largest forward of the step
    skipped: bool = False  # a GradScaler skipped the optimizer step (inf/nan gradients)
    backward_calls: int = 1
    accumulation_unscaled: bool = False  # losses divided by the accumulation count were multiplied back


@dataclass
class Site:
    """A construct the rewrite may have changed (an optimizer, a DataLoader, ...), where it was built."""

    id: int
    kind: str
    frames: list[tuple[str, int]]  # (user's path, line), innermost first, only files of the user's project
    details: dict[str, Any] = field(default_factory=dict)

    def where(self) -> str:
        if not self.frames:
            return "?"
        path, line = self.frames[0]
        return f"{Path(path).name}:{line}"


@dataclass
class RunRecord:
    status: str = DIED
    message: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    adaptations: list[str] = field(default_factory=list)
    backward_calls: int = 0
    optimizer_steps: int = 0
    step_mode: str = "optimizer"  # how steps were counted: "optimizer" steps or "backward" passes
    location: Optional[str] = None  # file:line in the user's script where it failed
    traceback: Optional[str] = None
    returncode: Optional[int] = None
    wall_s: Optional[float] = None
    log_tail: str = ""
    log_bytes: Optional[int] = None  # everything the run printed (the log keeps only the end)
    sites: dict[int, Site] = field(default_factory=dict)
    uses: dict[int, dict[str, int]] = field(default_factory=dict)  # site id -> phase -> count
    training: dict[str, Any] = field(default_factory=dict)  # parameter change (checked runs)
    guard: dict[str, list[str]] = field(default_factory=dict)  # blocked / copied-on-write paths
    imported: list[dict[str, Any]] = field(default_factory=list)  # the project's own modules the run imported
    exceptions: dict[str, int] = field(default_factory=dict)  # raised inside the steps, caught or not: key -> count
    exception_samples: list[dict[str, Any]] = field(default_factory=list)  # the first of each key
    ranges: Optional[dict[str, Any]] = None  # float16 range probe of the 16-bit autocast regions
    global_rng: dict[str, str] = field(default_factory=dict)  # generator -> dataset that drew from it in a fetch
    nudged_tensors: Optional[int] = None  # noise-floor runs: parameter tensors nudged by one ulp
    rank: int = 0
    world_size: int = 1
    load_before: Optional[float] = None  # 1-minute load average when the run started (parent)
    ranks: list["RunRecord"] = field(default_factory=list)  # torchrun: one record per rank

    @property
    def completed(self) -> bool:
        return self.status in COMPLETED and bool(self.steps)

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]

    @property
    def step_times(self) -> list[Optional[float]]:
        return [s.time_s for s in self.steps]

    def timed_step_times(self, warmup: int) -> list[float]:
        return [s.time_s for s in self.steps[warmup:] if s.time_s is not None]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("steps", "sites", "uses", "ranks"):
            data.pop(key)
        data["steps_recorded"] = len(self.steps)
        data["losses"] = self.losses
        data["step_times_s"] = self.step_times
        data["saved_bytes_per_step"] = [s.saved_bytes for s in self.steps]
        data["skipped_steps"] = [s.step for s in self.steps if s.skipped]
        data["backward_calls_per_step"] = [s.backward_calls for s in self.steps]
        data["accumulation_unscaled"] = any(s.accumulation_unscaled for s in self.steps)
        data["constructs"] = [
            {"kind": site.kind, "where": [f"{p}:{line}" for p, line in site.frames], "details": site.details,
             "uses": self.uses.get(site.id, {})}
            for site in self.sites.values()
        ]
        if self.ranks:
            data["per_rank"] = [
                {"rank": r.rank, "status": r.status, "losses": r.losses, "step_times_s": r.step_times,
                 "memory": r.memory}
                for r in self.ranks
            ]
        return data


class EventWriter:
    """Appends one JSON object a line and flushes it, so the parent sees progress and partial runs."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the run

    def write(self, event: str, /, **data: Any) -> None:
        self._file.write(json.dumps({"event": event, **data}, allow_nan=True, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_events(path: Path) -> RunRecord:
    """The run as far as the file tells; a missing final record leaves status DIED."""
    record = RunRecord()
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return record
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if not isinstance(event, dict):
            continue
        kind = event.pop("event", None)
        if kind == "start":
            record.environment = event.get("environment", {})
            record.rank = int(event.get("rank", 0))
            record.world_size = int(event.get("world_size", 1))
        elif kind == "step":
            record.steps.append(StepRecord(**{k: event[k] for k in StepRecord.__dataclass_fields__ if k in event}))
        elif kind == "site":
            frames = [(str(p), int(n)) for p, n in event.get("frames", [])]
            record.sites[int(event["id"])] = Site(int(event["id"]), event.get("kind", "?"), frames,
                                                  event.get("details", {}))
        elif kind == "use":
            uses = record.uses.setdefault(int(event["site"]), {})
            uses[event["phase"]] = max(uses.get(event["phase"], 0), 1)
        elif kind == "end":
            record.status = event.get("status", DIED)
            record.message = event.get("message", "")
            record.memory = event.get("memory", {})
            record.adaptations = event.get("adaptations", [])
            record.backward_calls = event.get("backward_calls", 0)
            record.optimizer_steps = event.get("optimizer_steps", 0)
            record.step_mode = event.get("step_mode", "optimizer")
            record.location = event.get("location")
            record.traceback = event.get("traceback")
            record.wall_s = event.get("wall_s")
            record.training = event.get("training", {})
            record.guard = event.get("guard", {})
            record.imported = event.get("imported", [])
            record.exceptions = {str(k): int(v) for k, v in (event.get("exceptions") or {}).items()}
            record.exception_samples = event.get("exception_samples") or record.exception_samples
            record.ranges = event.get("ranges")
            record.global_rng = event.get("global_rng") or {}
            record.nudged_tensors = event.get("nudged_tensors")
            for site, phases in (event.get("uses") or {}).items():
                record.uses[int(site)] = {str(k): int(v) for k, v in phases.items()}
        elif kind == "exception":  # also before the end record: a run killed later keeps them
            if len(record.exception_samples) < 20:
                record.exception_samples.append(event)
            key = str(event.get("key", "?"))
            record.exceptions[key] = max(record.exceptions.get(key, 0), 1)
    return record


def rank_path(path: Path, rank: int) -> Path:
    """Events file of one rank: run.jsonl -> run.rank1.jsonl (rank 0 keeps the plain name)."""
    return path if rank == 0 else path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def read_ranks(path: Path, world_size: int) -> RunRecord:
    """All ranks' records, combined: the loss averaged over ranks, the step time of the slowest rank."""
    if world_size <= 1:
        return read_events(path)
    ranks = [read_events(rank_path(path, r)) for r in range(world_size)]
    for r, record in enumerate(ranks):
        record.rank = r
    return combine_ranks(ranks)


def combine_ranks(ranks: list[RunRecord]) -> RunRecord:
    first = ranks[0]
    combined = RunRecord(
        status=max((r.status for r in ranks), key=lambda s: SEVERITY.index(s) if s in SEVERITY else len(SEVERITY)),
        environment=dict(first.environment, world_size=len(ranks)),
        adaptations=sorted({a for r in ranks for a in r.adaptations}),
        backward_calls=sum(r.backward_calls for r in ranks), optimizer_steps=sum(r.optimizer_steps for r in ranks),
        step_mode=first.step_mode, training=first.training, imported=first.imported, world_size=len(ranks),
        exceptions={k: sum(r.exceptions.get(k, 0) for r in ranks) for r in ranks for k in r.exceptions},
        exception_samples=[s for r in ranks for s in r.exception_samples][:20], ranges=first.ranges,
        global_rng={k: v for r in ranks for k, v in r.global_rng.items()}, nudged_tensors=first.nudged_tensors,
        sites=first.sites, uses=first.uses, ranks=ranks,
        wall_s=max((r.wall_s for r in ranks if r.wall_s is not None), default=None),
    )
    worst = next((r for r in ranks if r.status == combined.status), first)
    combined.message = (f"rank {worst.rank}: {worst.message}" if worst.message else "")
    combined.location, combined.traceback = worst.location, worst.traceback
    combined.guard = {key: sorted({p for r in ranks for p in r.guard.get(key, [])}) for key in ("blocked", "copied")}
    for key in ("peak_rss_bytes", "cuda_max_allocated_bytes", "saved_for_backward_max_bytes"):
        values = [r.memory[key] for r in ranks if key in r.memory]
        if values:
            combined.memory[key] = max(values)
    count = min(len(r.steps) for r in ranks)
    for i in range(count):
        steps = [r.steps[i] for r in ranks]
        times = [s.time_s for s in steps]
        combined.steps.append(StepRecord(
            step=i + 1, loss=statistics.fmean(s.loss for s in steps),
            time_s=None if any(t is None for t in times) else max(t for t in times if t is not None),
            saved_bytes=max((s.saved_bytes for s in steps if s.saved_bytes is not None), default=None),
            skipped=any(s.skipped for s in steps), backward_calls=steps[0].backward_calls,
            accumulation_unscaled=any(s.accumulation_unscaled for s in steps),
        ))
    return combined


def count_steps(path: Path) -> int:
    """Steps recorded so far (for the progress line); cheap enough to call a few times a second."""
    try:
        with open(path, "rb") as handle:
            return handle.read().count(b'"event": "step"')
    except FileNotFoundError:
        return 0
