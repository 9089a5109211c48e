"""Show a verification: plain-text report, JSON with everything measured, PNG plot (matplotlib, lazily)."""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from gpulint import __version__
from gpulint.verify import events

if TYPE_CHECKING:
    from gpulint.verify.probe import Machine
    from gpulint.verify.results import ScriptResult, VerifyOptions

JSON_SCHEMA_VERSION = 2


class PlotError(Exception):
    """The plot cannot be written (matplotlib missing, bad path); the message says which."""


def _ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _bytes(value: Optional[int]) -> str:
    if value is None:
        return "-"
    if value >= 1 << 30:
        return f"{value / (1 << 30):.2f} GiB"
    return f"{value / (1 << 20):.2f} MiB"


def _ratio(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _loss(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


def _relative_files(result: "ScriptResult") -> list[str]:
    return [os.path.relpath(f.path) for f in result.files]


def script_header(result: "ScriptResult") -> str:
    line = f"== {result.path}"
    if result.verdict == "SKIP":
        return line + ": no applicable fixes, nothing to verify"
    if result.verdict == "ERROR" and not result.applied:
        return line + ": " + "; ".join(result.reasons)
    choice = result.tolerance
    line += f": rewrite applies {', '.join(result.applied) or 'fixes'}"
    if choice is not None:
        line += f" (loss tolerance {choice.tolerance.describe()}; set by {', '.join(choice.decided_by) or 'default'})"
    files = _relative_files(result)
    if len(files) > 1 or (files and os.path.realpath(result.files[0].path) != os.path.realpath(result.path)):
        line += "\n   rewritten files: " + ", ".join(files)
    return line


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _steps_cell(record: Optional[events.RunRecord]) -> str:
    if record is None:
        return "-"
    return f"{len(record.steps)} ({events.STATUS_WORDS.get(record.status, record.status)})"


def _speed_text(result: "ScriptResult") -> Optional[str]:
    comparison = result.comparison
    timing = comparison.timing if comparison else None
    if timing is None:
        if result.repeats == 0:
            return "speed: not measured (numerics-only check)"
        return None
    runs = len(timing.order) // 2
    if timing.speedup is None:
        return "speed: not measured (" + ("; ".join(timing.failures) or "no timed steps") + ")"
    s = timing.speedup
    if s.verdict == "faster":
        head = f"{s.estimate:.2f}x faster"
    elif s.verdict == "slower":
        head = f"{s.estimate:.2f}x (slower)"
    else:
        head = f"no measurable difference ({s.estimate:.2f}x)"
    detail = (f"95% CI {s.low:.2f}-{s.high:.2f}x over {s.pairs} run pair{'s' if s.pairs != 1 else ''}, "
              f"{runs} interleaved timed run{'s' if runs != 1 else ''} of each (ABBA), the script's own settings; "
              f"{timing.describe_load()}")
    if s.pairs == 1:
        detail += "; one pair: the interval covers step-to-step jitter only, not run-to-run variation"
    return f"speed: {head} ({detail})"


def script_table(result: "ScriptResult", options: "VerifyOptions") -> str:
    out = [script_header(result)]
    original, rewritten, comparison = result.original, result.rewritten, result.comparison
    if original is not None:
        env = original.environment
        device = f"{env.get('device', '?')} ({env.get('device_name', '?')}"
        if env.get("device") == "cpu" and env.get("cpu_bf16"):
            device += f", bfloat16 {env['cpu_bf16']}"
        device += ")"
        ran = max(len(original.steps), len(rewritten.steps) if rewritten else 0)
        steps = f"{result.steps} steps a run" + (f" ({ran} ran)" if ran != result.steps else "")
        world = f", {original.world_size} processes (torchrun)" if original.world_size > 1 else ""
        out.append(f"device: {device}, torch {env.get('torch', '?')}, CUDA {env.get('cuda') or '-'}{world}; "
                   f"{steps}, timing after {result.warmup} warm-up steps")
    if comparison is not None and original is not None and rewritten is not None:
        rows = [["", "original", "rewritten", "change"]]
        rows.append(["steps (checked run)", _steps_cell(original), _steps_cell(rewritten), ""])
        timing = comparison.timing
        if timing is not None and timing.speedup is not None:
            rows.append(["median step time (timed runs)", _ms(timing.median_original), _ms(timing.median_rewritten),
                         f"speedup {timing.speedup.estimate:.2f}x"])
        if comparison.memory_metric:
            rows.append([comparison.memory_metric, _bytes(comparison.memory_original),
                         _bytes(comparison.memory_rewritten), f"memory ratio {_ratio(comparison.memory_ratio)}"])
        rows.append(["peak RSS", _bytes(original.memory.get("peak_rss_bytes")),
                     _bytes(rewritten.memory.get("peak_rss_bytes")), _ratio(comparison.rss_ratio)])
        if original.steps and rewritten.steps:
            rows.append(["loss first / last", f"{_loss(original.losses[0])} / {_loss(original.losses[-1])}",
                         f"{_loss(rewritten.losses[0])} / {_loss(rewritten.losses[-1])}", ""])
        out.append(_table(rows))
        loss = comparison.loss
        if loss is not None and loss.max_step_deviation is not None:
            detail = (f"max step deviation {loss.max_step_deviation:.1e} (limit {loss.tolerance.per_step:g}) "
                      f"over {loss.compared_steps} steps")
            if loss.mean_last_deviation is not None and loss.tolerance.mean_last is not None:
                detail += (f", last-{loss.last_n} mean {loss.mean_last_deviation:.2%} "
                           f"(limit {loss.tolerance.mean_last:.0%})")
            if loss.rank is not None:
                detail += f", worst rank {loss.rank}"
            out.append(f"loss: {'PASS' if loss.passed else 'FAIL'}, {detail}")
        out.append(f"training: original: {comparison.training_original.describe()}")
        out.append(f"          rewritten: {comparison.training_rewritten.describe()}")
        speed = _speed_text(result)
        if speed:
            out.append(speed)
        for note in comparison.notes:
            out.append(f"note: {note}")
    if result.rules:
        out.append("rules:")
        for rule in result.rules:
            out.append(f"  {rule.code} {rule.status}: {rule.detail}")
    if original is not None and original.environment.get("sandbox"):
        checked = result.isolation.get("files_checked")
        if result.isolation.get("changed"):
            verdict = "SOME OF YOUR FILES CHANGED, see the warning below"
        elif checked is not None:
            verdict = f"your files were not changed ({checked} checked before and after)"
        else:
            verdict = "your files were not changed"
        out.append(f"isolation: every run had its own sandbox ({original.environment['sandbox']}); {verdict}")
    for note in result.notes:
        if result.verdict != "SKIP":
            out.append(f"note: {note}")
    for doubt in result.doubts:
        out.append(f"inconclusive: {doubt}")
    for reason in result.reasons:
        out.append(f"reason: {reason}")
    for label, record in (("original", original), ("rewritten", rewritten)):
        if record is not None and not record.completed and record.log_tail.strip():
            tail = "\n".join(record.log_tail.strip().splitlines()[-6:])
            out.append(f"{label} output (last lines):\n" + "\n".join("    " + line for line in tail.splitlines()))
    if result.verdict != "SKIP":
        out.append(f"verdict: {result.verdict}")
    return "\n".join(out) + "\n"


def summary_table(results: Sequence["ScriptResult"]) -> str:
    rows = [["script", "rules", "speedup (95% CI)", "memory ratio", "loss", "trained", "verdict"]]
    for r in results:
        c = r.comparison
        loss = "-" if c is None or c.loss is None else ("PASS" if c.loss.passed else "FAIL")
        speed = "-"
        if c is not None and c.timing is not None and c.timing.speedup is not None:
            s = c.timing.speedup
            speed = f"{s.estimate:.2f}x ({s.low:.2f}-{s.high:.2f})"
        trained = "-" if c is None else ("yes" if c.training_original.trained and c.training_rewritten.trained
                                          else "no")
        rows.append([Path(r.path).name, ",".join(r.applied) or "-", speed, _ratio(c.memory_ratio if c else None),
                     loss, trained, r.verdict])
    return _table(rows) + "\n"


def text_report(results: Sequence["ScriptResult"], options: "VerifyOptions", uncovered: Sequence[str] = ()) -> str:
    parts = [script_table(r, options) for r in results]
    if uncovered:
        parts.append("not verified (INCONCLUSIVE):\n" + "\n".join(f"  {line}" for line in uncovered) + "\n")
    if len(results) > 1:
        parts.append("summary\n" + summary_table(results))
    return "\n".join(parts)


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def result_json(result: "ScriptResult") -> dict[str, Any]:
    choice = result.tolerance
    return {
        "path": result.path,
        "verdict": result.verdict,
        "passed": result.passed,
        "rules_applied": list(result.applied),
        "rules": [r.to_json() for r in result.rules],
        "rewritten_files": [{"path": str(f.path), "rules_applied": list(f.applied)} for f in result.files],
        "tolerance": None if choice is None else {
            "name": choice.tolerance.name, "per_step": choice.tolerance.per_step,
            "mean_last": choice.tolerance.mean_last, "last_n": choice.tolerance.last_n,
            "decided_by": list(choice.decided_by), "unregistered_rules": list(choice.unknown),
        },
        "steps": result.steps, "warmup": result.warmup, "timed_repeats": result.repeats,
        "rewritten_path": result.rewritten_path,
        "diff": result.diff,
        "runs": {
            "original": result.original.to_json() if result.original else None,
            "rewritten": result.rewritten.to_json() if result.rewritten else None,
        },
        "comparison": result.comparison.to_json() if result.comparison else None,
        "isolation": result.isolation,
        "reasons": result.reasons,
        "inconclusive": result.doubts,
        "notes": result.notes,
    }


def report_json(results: Sequence["ScriptResult"], options: "VerifyOptions", machine: Optional["Machine"] = None,
                uncovered: Sequence[str] = ()) -> dict[str, Any]:
    environment: dict[str, Any] = {}
    for r in results:
        if r.original is not None and r.original.environment:
            environment = dict(r.original.environment)
            break
    verdicts = [r.verdict for r in results]
    return _clean({
        "schema_version": JSON_SCHEMA_VERSION,
        "gpulint_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {
            "steps": options.steps, "warmup": options.warmup, "device": options.device, "repeats": options.repeats,
            "nproc_per_node": options.nproc, "select": list(options.select) if options.select else None,
            "min_speedup": options.min_speedup, "timeout_s": options.timeout, "threads": options.threads,
            "seed": options.seed, "script_args": list(options.script_args),
        },
        "environment": environment,
        "machine": machine.to_json() if machine is not None else None,
        "passed": bool(results) and all(r.passed or r.verdict == "SKIP" for r in results)
        and not uncovered,
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        "not_verified": list(uncovered),
        "scripts": [result_json(r) for r in results],
    })


def write_json(path: Path, results: Sequence["ScriptResult"], options: "VerifyOptions",
               machine: Optional["Machine"] = None, uncovered: Sequence[str] = ()) -> None:
    path.write_text(json.dumps(report_json(results, options, machine, uncovered), indent=2) + "\n", encoding="utf-8")


def write_plot(path: Path, results: Sequence["ScriptResult"]) -> None:
    """Loss curves (left) and timed step-time distributions (right), one row per verified script."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from gpulint.core.extras import install_hint

        raise PlotError(f"--plot needs matplotlib: {install_hint('verify', 'matplotlib')}") from None
    shown = [r for r in results if r.original is not None and r.rewritten is not None]
    rows = max(1, len(shown))
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.2 * rows), squeeze=False)
    if not shown:
        axes[0][0].text(0.5, 0.5, "no completed runs", ha="center")
    for row, result in zip(axes, shown):
        loss_ax, time_ax = row
        name = Path(result.path).name
        for label, record, style in (("original", result.original, "-"), ("rewritten", result.rewritten, "--")):
            assert record is not None
            loss_ax.plot([s.step for s in record.steps], record.losses, style, label=label)
        loss_ax.set_title(f"{name}: loss per step (checked runs)")
        loss_ax.set_xlabel("step")
        loss_ax.legend()
        timing = result.comparison.timing if result.comparison else None
        if timing is None or not timing.original_runs or not timing.rewritten_runs:
            time_ax.text(0.5, 0.5, "speed not measured", ha="center")
            continue
        times = [[t * 1000 for run in runs for t in run] for runs in (timing.original_runs, timing.rewritten_runs)]
        time_ax.boxplot(times)
        medians = [statistics.median(t) for t in times]
        time_ax.set_xticks([1, 2], [f"original\nmedian {medians[0]:.1f} ms", f"rewritten\nmedian {medians[1]:.1f} ms"])
        time_ax.set_title(f"{name}: step time, timed runs (ms)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise PlotError(f"cannot write the plot to {path}: {exc}") from None
    finally:
        plt.close(fig)
