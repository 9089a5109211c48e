"""Issue 24 (and issue 22 item 15), end to end: each case a verdict could not be acted on, as a real verification.

Every case runs a small script of tests/verify/scripts next to its rewrite (checked runs, no
timed runs, one thread). On 02ed7e3 these gave a false FAIL (fused AdamW in bfloat16, the README
demo, a bug fix read as damage), a false PASS (float16 that overflows, an exception the script
swallowed), an overstated coverage, blame on mixed precision for what workers did, and verdicts
that contradicted the lines above them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify.session import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS, NUMERICS_ONLY_STEPS

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "scripts"
ROOT = Path(__file__).resolve().parents[2]


def _verify(tmp_path: Path, script: str, steps: int = 40, *args: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", str(SCRIPTS / script), "--steps", str(steps), "--warmup", "2",
                                       "--repeats", "0", "--threads", "1", "--no-diff", "--json", str(report),
                                       *args])
    data = json.loads(report.read_text())["scripts"][0] if report.exists() else {}
    return result.exit_code, result.output, data


def test_fused_adamw_in_bfloat16_passes_within_the_measured_noise_floor(tmp_path: Path) -> None:
    """On 02ed7e3: FAIL, 5.8e-3 against the fused-optimizer limit 1e-4. Whether the fused and the for-loop AdamW
    round differently is the CPU's kernels' doing: they did on the machine this was written on (5.8e-3), and are
    identical bit for bit on a Xeon with AVX512-BF16 and AMX (2026-12-07), where the check passes without needing
    the noise floor. Either way the verdict is PASS; the noise floor is asserted where the runs differ."""
    code, output, script = _verify(tmp_path, "bf16_fused.py")
    assert script["rules_applied"] == ["GPU201"], output
    loss = script["comparison"]["loss"]
    if loss["max_step_deviation"] == 0.0:  # this CPU's fused and for-loop kernels round alike
        assert code == EXIT_PASS and script["verdict"] == "PASS", output
        assert "loss: identical bit for bit" in output, output
        return
    assert loss["max_step_deviation"] > 1e-4  # beyond the rule's own tolerance...
    floor = loss["noise_floor"]
    assert floor["runs"] == 1 and "float32 ulp" in floor["nudge"] and max(floor["envelope"]) > 0
    assert loss["deviation_at_worst_step"] <= loss["bound_at_worst_step"]  # ...within 3x the nudged original's drift
    assert script["noise_runs"][0]["nudged_tensors"] == 8
    assert code == EXIT_PASS and script["verdict"] == "PASS", output
    assert "noise floor: 1 run of the original with its weights nudged by one float32 ulp" in output


def test_float16_that_overflows_fails_on_a_cpu_that_ran_it_in_bfloat16(tmp_path: Path) -> None:
    """On 02ed7e3: the region ran as bfloat16, fp32's range, and the check called itself meaningful."""
    # `--float16 emulate`: a CPU with fast float16 (AMX, AVX512-FP16) would otherwise run the region in float16 itself
    code, output, script = _verify(tmp_path, "float16/raw_features.py", 20, "--float16", "emulate")
    assert script["rules_applied"] == ["GPU001"], output
    assert code == EXIT_FAIL and script["verdict"] == "FAIL", output
    assert script["verdict_reason"].startswith("float16 overflow: linear at raw_features.py:21 produced |x| = ")
    assert "beyond float16's 65504" in script["verdict_reason"]
    assert "bfloat16 emulation" in script["verdict_reason"] and "bfloat16 emulation" in output
    assert script["float16"]["bfloat16_emulation"] is True and script["float16"]["probe"]["max_abs"] > 65504
    assert "meaningful" not in output


def test_an_exception_the_script_swallows_is_counted_and_fails(tmp_path: Path) -> None:
    """On 02ed7e3: PASS, while index_add_ raised on every step under the script's bare except."""
    code, output, script = _verify(tmp_path, "swallowed_exception.py", 20)
    assert code == EXIT_FAIL and script["verdict"] == "FAIL", output
    reason = script["verdict_reason"]
    assert reason.startswith("the rewritten run raised RuntimeError ") and "(the original: 0)" in reason
    assert "caught by the script at swallowed_exception.py:26: index_add_(): self (Float) and source" in reason
    assert script["runs"]["original"]["exceptions"] == {}
    assert script["comparison"]["loss"]["passed"] is True  # the loss alone would have passed it


def test_a_rule_is_exercised_only_when_every_edit_ran(tmp_path: Path) -> None:
    """On 02ed7e3: "GPU101 exercised" although the validation loader's rewrite never ran."""
    code, output, script = _verify(tmp_path, "two_loaders.py", 40, "--select", "GPU101")
    [rule] = script["rules"]
    assert rule["code"] == "GPU101" and rule["status"] == "PARTLY EXERCISED", output
    assert [edit["exercised"] for edit in rule["edits"]] == [True, False]
    assert script["not_covered"] and script["not_covered"][0].startswith("GPU101 at two_loaders.py:14 (val_loader")
    assert code == EXIT_PASS and "verdict: PASS, except the 1 edit listed as not covered" in output


def test_workers_drawing_other_random_numbers_are_named_not_blamed_on_mixed_precision(tmp_path: Path) -> None:
    """On 02ed7e3: FAIL, "loss differs ... (limit 0.02, mixed precision)"."""
    code, output, script = _verify(tmp_path, "augmented.py")
    assert script["rules_applied"] == ["GPU001", "GPU101", "GPU102", "GPU201"], output
    assert script["runs"]["original"]["global_rng"] == {"torch": "Waves"}
    assert script["changes"] and script["changes"][0].startswith("random streams: the dataset (Waves) draws from "
                                                                 "torch's process-wide generator")
    assert script["compared_with"] == "the original with GPU102 applied (the random streams made equal)"
    # mixed precision (GPU001) on a CPU without native bfloat16 is a numerics-only check of fewer steps
    emulated = json.loads((tmp_path / "report.json").read_text())["machine"]["cpu_bf16"] == "emulated"
    steps = NUMERICS_ONLY_STEPS if emulated else 40
    assert script["steps"] == steps and script["extra_runs"]["reference"]["steps_recorded"] == steps
    assert ("this CPU has no native bfloat16" in output) is emulated
    assert code == EXIT_PASS and script["verdict"] == "PASS", output
    assert "mixed precision" not in script["verdict_reason"]


def test_blame_by_subsets_names_the_rule_that_causes_the_failure(tmp_path: Path) -> None:
    """On 02ed7e3 the reason named mixed precision; the dataset's counter runs per worker (GPU102)."""
    code, output, script = _verify(tmp_path, "curriculum.py")
    assert code == EXIT_FAIL and script["verdict"] == "FAIL", output
    assert "caused by GPU102 (it reproduces the failure alone)" in script["verdict_reason"]
    assert "random streams" not in script["verdict_reason"]  # it draws nothing from a global generator
    blame = script["blame"]
    assert blame[0].startswith("caused by GPU102")
    assert {line.split(" alone")[0] for line in blame[1:]} == {"GPU001", "GPU101", "GPU102", "GPU201"}
    assert [line for line in blame[1:] if not line.endswith("matches")][0].startswith("GPU102 alone")


def test_a_fix_that_makes_more_parameters_train_is_named_with_the_counts(tmp_path: Path) -> None:
    """On 02ed7e3: FAIL under the numerics-neutral limit, never saying that 8 more tensors now train."""
    code, output, script = _verify(tmp_path, "checkpoint_input.py", 30, "--select", "GPU302")
    assert script["rules_applied"] == ["GPU302"], output
    assert script["changes"][0].startswith("more parameters train: 10 of 10 parameter tensors change in the rewrite, "
                                           "2 of 10 in the original (GPU302")
    lines = output.splitlines()
    change = next(i for i, line in enumerate(lines) if line.startswith("change: more parameters train"))
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    assert change < verdict
    assert code == EXIT_PASS and script["verdict"] == "PASS", output
    assert script["comparison"]["loss"] is None and "loss: not compared: the rewrite changes trained parameters" \
        in output


def test_a_script_that_ends_by_itself_is_measured_at_exit(tmp_path: Path) -> None:
    """On 02ed7e3: "parameters not measured", and INCONCLUSIVE for "no significant loss decrease" beside "loss
    decreasing (p=0.00019)"."""
    code, output, script = _verify(tmp_path, "ends_early.py", 60)
    for label in ("original", "rewritten"):  # 10 steps: before --steps, and before any shortening for this CPU
        assert script["runs"][label]["status"] == "finished" and len(script["runs"][label]["losses"]) == 10, output
    training = script["comparison"]["training"]
    for label in ("original", "rewritten"):
        assert training[label]["weights_moved"] is True and training[label]["trained"] is True
    assert "parameters not measured" not in output
    assert code == EXIT_PASS and script["verdict"] == "PASS", output
    imported = [item["path"] for run in script["runs"].values() for item in run["imported"]]
    assert not [p for p in imported if Path(p).name in ("_ops.py", "_classes.py")]  # no phantom user files


def test_both_runs_diverging_at_the_same_step_is_said_and_the_steps_before_judged(tmp_path: Path) -> None:
    """Issue 22 item 15: "the rewritten loss is NaN" and "loss decreasing" for both."""
    code, output, script = _verify(tmp_path, "diverges.py", 30, "--select", "GPU101,GPU201")
    loss = script["comparison"]["loss"]
    assert loss["diverged_at"] == 15 and loss["compared_steps"] == 14 and loss["passed"] is True, output
    assert "rewritten loss is NaN" not in output
    assert "both runs diverged (NaN or inf loss) at step 15, the rewrite as the original" in output
    assert "then diverged (NaN or inf from step 15)" in output
    assert code == EXIT_INCONCLUSIVE  # the 14 steps before show no training: said in the same words
    assert "loss decreasing" not in output


def test_the_readme_demo_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 02ed7e3: FAIL, "loss differs by 6.96e-02 relative at step 59 (limit 0.02, mixed precision)".

    The README's command, with the speed measurement left out (--repeats 0): timed runs come after
    the numerics and cannot change a verdict without --min-speedup.
    """
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["verify", "examples/shapes_classifier.py", "--repeats", "0", "--no-diff",
                                       "--", "--epochs", "1"])
    assert result.exit_code == EXIT_PASS, result.output
    assert "verdict: PASS" in result.output
