"""The harness's record of one run, written as JSON lines so a killed run still leaves its steps.

Written by the harness subprocess, read by the parent; no torch here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

# how a run ended
STOPPED = "stopped"  # reached --steps; the harness stopped the script
FINISHED = "finished"  # the script returned (or exited 0) before --steps
CRASHED = "crashed"  # the script raised
NO_BACKWARD = "no-backward"  # the script ended without ever calling backward()
NO_STEP = "no-step"  # backward() was called but no torch optimizer ever stepped
ERROR = "error"  # the harness could not run the script (bad device request, missing file)
TIMEOUT = "timeout"  # set by the parent: killed after --timeout seconds
DIED = "died"  # set by the parent: the process ended without a final record (signal, out of memory)

COMPLETED = frozenset({STOPPED, FINISHED})


@dataclass
class StepRecord:
    step: int  # 1-based
    loss: float  # unscaled; mean of the step's losses when it ran several backward passes
    time_s: Optional[float]  # wall time since the previous step boundary; None for the first step
    saved_bytes: Optional[int] = None  # bytes saved for backward (CPU measurement), largest forward of the step
    skipped: bool = False  # a GradScaler skipped the optimizer step (inf/nan gradients)
    backward_calls: int = 1


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
    location: Optional[str] = None  # file:line in the user's script where it failed
    traceback: Optional[str] = None
    returncode: Optional[int] = None
    wall_s: Optional[float] = None
    log_tail: str = ""

    @property
    def completed(self) -> bool:
        return self.status in COMPLETED and bool(self.steps)

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]

    @property
    def step_times(self) -> list[Optional[float]]:
        return [s.time_s for s in self.steps]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("steps")
        data["steps_recorded"] = len(self.steps)
        data["losses"] = self.losses
        data["step_times_s"] = self.step_times
        data["saved_bytes_per_step"] = [s.saved_bytes for s in self.steps]
        data["skipped_steps"] = [s.step for s in self.steps if s.skipped]
        return data


class EventWriter:
    """Appends one JSON object a line and flushes it, so the parent sees progress and partial runs."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the run

    def write(self, kind: str, **data: Any) -> None:
        self._file.write(json.dumps({"event": kind, **data}, allow_nan=True) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_events(path: Path) -> RunRecord:
    """The run as far as the file tells; a missing final record leaves status DIED."""
    record = RunRecord()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return record
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        kind = event.pop("event", None)
        if kind == "start":
            record.environment = event.get("environment", {})
        elif kind == "step":
            record.steps.append(StepRecord(**{k: event[k] for k in StepRecord.__dataclass_fields__ if k in event}))
        elif kind == "end":
            record.status = event.get("status", DIED)
            record.message = event.get("message", "")
            record.memory = event.get("memory", {})
            record.adaptations = event.get("adaptations", [])
            record.backward_calls = event.get("backward_calls", 0)
            record.optimizer_steps = event.get("optimizer_steps", 0)
            record.location = event.get("location")
            record.traceback = event.get("traceback")
            record.wall_s = event.get("wall_s")
    return record


def count_steps(path: Path) -> int:
    """Steps recorded so far (for the progress line); cheap enough to call a few times a second."""
    try:
        with open(path, "rb") as handle:
            return handle.read().count(b'"event": "step"')
    except FileNotFoundError:
        return 0
