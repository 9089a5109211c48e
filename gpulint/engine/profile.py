"""Where the time goes: seconds per phase and per rule, summed over files (`--profile`).

Off by default and then free: the linter gets `NO_PROFILE`, whose timers are no-ops and
which leaves rule callbacks unwrapped. Data crosses process boundaries as plain dicts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

PHASES = ("read", "cache", "prefilter", "parse", "analysis", "rules", "placing", "fixing", "writing")
_NULL = nullcontext()


class Profile:
    """Accumulates wall time per phase and per rule code."""

    enabled = True

    def __init__(self) -> None:
        self.phases: defaultdict[str, float] = defaultdict(float)
        self.rules: defaultdict[str, float] = defaultdict(float)
        self.counts: defaultdict[str, int] = defaultdict(int)

    @contextmanager
    def _timer(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] += time.perf_counter() - start

    def phase(self, name: str) -> ContextManager[None]:
        return self._timer(name)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def timed(self, code: str, func: F) -> F:
        """`func`, charging the time spent in it to rule `code`."""
        rules = self.rules
        clock = time.perf_counter

        def timed_call(*args: Any) -> Any:
            start = clock()
            try:
                return func(*args)
            finally:
                rules[code] += clock() - start

        return timed_call  # type: ignore[return-value]

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {"phases": dict(self.phases), "rules": dict(self.rules), "counts": dict(self.counts)}

    def merge(self, data: dict[str, dict[str, float]]) -> None:
        for name, seconds in data.get("phases", {}).items():
            self.phases[name] += seconds
        for code, seconds in data.get("rules", {}).items():
            self.rules[code] += seconds
        for name, n in data.get("counts", {}).items():
            self.counts[name] += int(n)

    def render(self, wall: float, workers: int) -> str:
        """A small table for stderr: phases in pipeline order, then rules slowest first."""
        total = sum(self.phases.values()) or 1e-12
        lines = [f"gpulint profile: {wall:.3f} s wall, {workers} worker{'s' if workers != 1 else ''}; "
                 f"times below are summed over files ({total:.3f} s)"]
        counts = ", ".join(f"{n} {name}" for name, n in sorted(self.counts.items()))
        if counts:
            lines.append(f"  files: {counts}")
        lines.append(f"  {'phase':<24}{'seconds':>10}{'share':>8}")
        ordered = [p for p in PHASES if p in self.phases] + sorted(set(self.phases) - set(PHASES))
        for name in ordered:
            seconds = self.phases[name]
            lines.append(f"  {name:<24}{seconds:>10.3f}{seconds / total:>8.1%}")
        if self.rules:
            rules_total = self.phases.get("rules", 0.0)
            lines.append(f"  {'rule (inside rules)':<24}{'seconds':>10}{'share':>8}")
            for code, seconds in sorted(self.rules.items(), key=lambda item: (-item[1], item[0])):
                lines.append(f"  {code:<24}{seconds:>10.3f}{seconds / total:>8.1%}")
            walk = rules_total - sum(self.rules.values())
            if walk > 0:
                lines.append(f"  {'(tree walk)':<24}{walk:>10.3f}{walk / total:>8.1%}")
        return "\n".join(lines) + "\n"


class _NoProfile(Profile):
    """The default: measures nothing and costs (almost) nothing."""

    enabled = False

    def phase(self, name: str) -> ContextManager[None]:
        return _NULL

    def count(self, name: str, n: int = 1) -> None:
        pass

    def timed(self, code: str, func: F) -> F:
        return func


NO_PROFILE: Profile = _NoProfile()
