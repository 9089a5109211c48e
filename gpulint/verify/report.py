"""Show a verification: plain-text table, JSON with everything measured, PNG plot (matplotlib, lazily)."""

from __future__ import annotations

import datetime
import json
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from gpulint import __version__

if TYPE_CHECKING:
    from gpulint.verify.session import ScriptResult, VerifyOptions

JSON_SCHEMA_VERSION = 1


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


def script_header(result: "ScriptResult") -> str:
    line = f"== {result.path}"
    if result.verdict == "SKIP":
        return line + ": no applicable fixes, nothing to verify"
    if result.verdict == "ERROR":
        return line + ": " + "; ".join(result.reasons)
    choice = result.tolerance
    line += f": rewrite applies {', '.join(result.applied) or 'fixes'}"
    if choice is not None:
        line += f" (loss tolerance {choice.tolerance.describe()}; set by {', '.join(choice.decided_by) or 'default'})"
    return line


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def script_table(result: "ScriptResult", options: "VerifyOptions") -> str:
    out = [script_header(result)]
    original, rewritten, comparison = result.original, result.rewritten, result.comparison
    if original is not None:
        env = original.environment
        out.append(f"device: {env.get('device', '?')} ({env.get('device_name', '?')}), torch {env.get('torch', '?')}, "
                   f"CUDA {env.get('cuda') or '-'}; {options.steps} steps, timing after {options.warmup} warm-up steps")
    if comparison is not None and original is not None and rewritten is not None:
        rows = [["", "original", "rewritten", "change"]]
        rows.append(["steps", str(len(original.steps)), str(len(rewritten.steps)), ""])
        speed = "-" if comparison.speedup is None else f"speedup {comparison.speedup:.2f}x"
        rows.append(["median step time", _ms(comparison.median_time_original), _ms(comparison.median_time_rewritten),
                     speed])
        if comparison.memory_metric:
            rows.append([comparison.memory_metric, _bytes(comparison.memory_original),
                         _bytes(comparison.memory_rewritten), f"memory ratio {_ratio(comparison.memory_ratio)}"])
        rows.append(["peak RSS", _bytes(original.memory.get("peak_rss_bytes")),
                     _bytes(rewritten.memory.get("peak_rss_bytes")), _ratio(comparison.rss_ratio)])
        rows.append(["loss start / end", f"{_loss(original.losses[0])} / {_loss(original.losses[-1])}",
                     f"{_loss(rewritten.losses[0])} / {_loss(rewritten.losses[-1])}", ""])
        out.append(_table(rows))
        loss = comparison.loss
        if loss is not None:
            detail = f"max step deviation {loss.max_step_deviation:.1e} (limit {loss.tolerance.per_step:g})"
            if loss.mean_last_deviation is not None and loss.tolerance.mean_last is not None:
                detail += (f", last-{loss.tolerance.last_n} mean {loss.mean_last_deviation:.2%} "
                           f"(limit {loss.tolerance.mean_last:.0%})")
            out.append(f"loss verdict: {'PASS' if loss.passed else 'FAIL'}, {detail}")
        for note in comparison.notes:
            out.append(f"note: {note}")
    for note in result.notes:
        if result.verdict != "SKIP":
            out.append(f"note: {note}")
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
    rows = [["script", "rules", "speedup", "memory ratio", "loss", "verdict"]]
    for r in results:
        c = r.comparison
        loss = "-" if c is None or c.loss is None else ("PASS" if c.loss.passed else "FAIL")
        rows.append([Path(r.path).name, ",".join(r.applied) or "-", _ratio(c.speedup if c else None),
                     _ratio(c.memory_ratio if c else None), loss, r.verdict])
    return _table(rows) + "\n"


def text_report(results: Sequence["ScriptResult"], options: "VerifyOptions") -> str:
    parts = [script_table(r, options) for r in results]
    if len(results) > 1:
        parts.append("summary\n" + summary_table(results))
    return "\n".join(parts)


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
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
        "tolerance": None if choice is None else {
            "name": choice.tolerance.name, "per_step": choice.tolerance.per_step,
            "mean_last": choice.tolerance.mean_last, "last_n": choice.tolerance.last_n,
            "decided_by": list(choice.decided_by), "unregistered_rules": list(choice.unknown),
        },
        "rewritten_path": result.rewritten_path,
        "diff": result.diff,
        "runs": {
            "original": result.original.to_json() if result.original else None,
            "rewritten": result.rewritten.to_json() if result.rewritten else None,
        },
        "comparison": result.comparison.to_json() if result.comparison else None,
        "reasons": result.reasons,
        "notes": result.notes,
    }


def report_json(results: Sequence["ScriptResult"], options: "VerifyOptions") -> dict[str, Any]:
    environment: dict[str, Any] = {}
    for r in results:
        if r.original is not None and r.original.environment:
            environment = r.original.environment
            break
    return _clean({
        "schema_version": JSON_SCHEMA_VERSION,
        "gpulint_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {
            "steps": options.steps, "warmup": options.warmup, "device": options.device,
            "select": list(options.select) if options.select else None, "min_speedup": options.min_speedup,
            "timeout_s": options.timeout, "threads": options.threads, "seed": options.seed,
            "script_args": list(options.script_args),
        },
        "environment": environment,
        "passed": all(r.passed for r in results),
        "scripts": [result_json(r) for r in results],
    })


def write_json(path: Path, results: Sequence["ScriptResult"], options: "VerifyOptions") -> None:
    path.write_text(json.dumps(report_json(results, options), indent=2) + "\n", encoding="utf-8")


def write_plot(path: Path, results: Sequence["ScriptResult"], warmup: int = 0) -> None:
    """Loss curves (left) and step-time distributions (right), one row per verified script."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'gpulint[verify]' (or matplotlib)") from None
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
            steps = [s.step for s in record.steps]
            loss_ax.plot(steps, record.losses, style, label=label)
        loss_ax.set_title(f"{name}: loss per step")
        loss_ax.set_xlabel("step")
        loss_ax.legend()
        times = []
        for record in (result.original, result.rewritten):
            assert record is not None
            times.append([t * 1000 for t in record.step_times[warmup:] if t is not None] or [math.nan])
        time_ax.boxplot(times)
        medians = [statistics.median(t) if not math.isnan(t[0]) else math.nan for t in times]
        time_ax.set_xticks([1, 2], [f"original\nmedian {medians[0]:.1f} ms", f"rewritten\nmedian {medians[1]:.1f} ms"])
        time_ax.set_title(f"{name}: step time after warm-up (ms)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise PlotError(f"cannot write the plot to {path}: {exc}") from None
    finally:
        plt.close(fig)
