"""`gpulint verify` usage: decided before any run starts, never at the cost of a user's file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.verify.session import adapt_warmup

pytest.importorskip("torch")  # verify refuses to start without torch

TRAIN = """import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
with open(__file__ + ".ran", "w") as marker:
    marker.write("the script ran")
for step in range(100):
    loss = model(torch.randn(8, 4, device=device)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.fixture
def train(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    return script


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "nope.py")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.output.lower()


def test_a_path_is_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: Path) -> None:
    """Issue 13 item 3: without a path, verify ran every fixable script in the current directory."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["verify", "--steps", "3"])
    assert result.exit_code == 2
    assert "Missing argument" in result.output
    assert not Path(str(train) + ".ran").exists()


def test_json_without_a_value_cannot_swallow_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        train: Path) -> None:
    """Issue 10 item 2: `--json train.py` took the script as the report path and overwrote it after the runs."""
    monkeypatch.chdir(tmp_path)
    before = train.read_bytes()
    runner = CliRunner()
    alone = runner.invoke(main, ["verify", "--steps", "3", "--warmup", "1", "--json", "train.py"])
    assert alone.exit_code == 2 and "Missing argument" in alone.output
    other = tmp_path / "other.py"
    other.write_text(TRAIN)
    both = runner.invoke(main, ["verify", "--steps", "3", "--json", "train.py", "other.py"])
    assert both.exit_code == 2
    assert "refusing to write the report over a Python file" in both.output
    plot = runner.invoke(main, ["verify", "other.py", "--plot", str(train)])
    assert plot.exit_code == 2 and "--plot" in plot.output
    assert train.read_bytes() == before
    assert not Path(str(other) + ".ran").exists()  # refused before any run


@pytest.mark.parametrize("flag, value, message", [
    ("--json", "missing/report.json", "does not exist"),
    ("--json", ".", "is a directory"),
    ("--plot", "missing/plot.png", "does not exist"),
])
def test_bad_output_paths_are_refused_before_any_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: Path,
                                                     flag: str, value: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["verify", "train.py", flag, value])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not Path(str(train) + ".ran").exists()


def test_json_and_plot_cannot_be_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: Path) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["verify", "train.py", "--json", "out.png", "--plot", "out.png"])
    assert result.exit_code == 2 and "the same file" in result.output


def test_min_speedup_needs_timed_runs(train: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(train), "--repeats", "0", "--min-speedup", "1.1"])
    assert result.exit_code == 2 and "--min-speedup needs timed runs" in result.output


@pytest.mark.parametrize("steps, warmup, expected", [(60, 10, 10), (5, 10, 2), (10, 10, 4), (2, 1, 0), (1, 5, 0)])
def test_warmup_adapts_to_few_steps(steps: int, warmup: int, expected: int) -> None:
    """Issue 13 item 12: `--warmup 10 --steps 5` was refused; it now times what it can, with a note."""
    adapted, note = adapt_warmup(steps, warmup)
    assert adapted == expected
    assert (note is None) == (adapted == warmup or steps < 2)


def test_script_without_fixes_is_skipped_without_running(tmp_path: Path) -> None:
    script = tmp_path / "clean.py"
    script.write_text("raise SystemExit('must not run')\n")
    result = CliRunner().invoke(main, ["verify", str(script), "--", "--ignored", "arg"])
    assert result.exit_code == 0, result.output
    assert "no applicable fixes, nothing to verify" in result.output
    assert "must not run" not in result.output


def test_syntax_error_is_reported_not_run(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nopt = torch.optim.Adam(\n")
    result = CliRunner().invoke(main, ["verify", str(script)])
    assert result.exit_code == 1
    assert "cannot parse the script" in result.output


def test_a_folder_of_modules_names_the_scripts_that_import_them(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 item 9: `gpulint verify mingpt/` called model.py "not a training script" after running it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "__init__.py").write_text("")
    (lib / "model.py").write_text(
        "import torch\n\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n\n\n"
        "def make_optimizer(model):\n    return torch.optim.Adam(model.parameters(), lr=1e-2)\n")
    (tmp_path / "train.py").write_text("from lib.model import make_optimizer\nmake_optimizer(None)\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["verify", "lib"])
    assert result.exit_code == 2, result.output
    assert "holds no training script" in result.output
    assert "verify a script that imports it: train.py" in result.output
    named = CliRunner().invoke(main, ["verify", "lib/model.py"])
    assert named.exit_code == 2 and "verify a script that imports it: train.py" in named.output


def test_a_module_with_fixes_that_no_script_imports_is_not_a_pass(tmp_path: Path) -> None:
    """A folder with a script (nothing to fix) and a module with fixes it never imports: not verified, exit 3."""
    (tmp_path / "train.py").write_text("print('nothing to fix here')\n")
    (tmp_path / "helpers.py").write_text(
        "import torch\n\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n\n\n"
        "def make_optimizer(model):\n    return torch.optim.Adam(model.parameters(), lr=1e-2)\n")
    result = CliRunner().invoke(main, ["verify", str(tmp_path)])
    assert result.exit_code == 3, result.output
    assert "not verified (INCONCLUSIVE)" in result.output
    assert "helpers.py: a module with fixes; no script in its project imports it" in result.output


def test_the_verify_command_imports_no_torch() -> None:
    """torch loads only in the runs' subprocesses: `gpulint verify` starts, and says 'no torch', without it."""
    import subprocess
    import sys

    probe = ("import sys\nimport gpulint.cli, gpulint.verify.session, gpulint.verify.report, gpulint.verify.project\n"
             "print('torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.torch
def test_a_relative_workdir_inside_the_verified_folder_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             train: Path) -> None:
    """Issue 28's walk: `--workdir verify-out` killed the harness ("ended with status 1 before reporting"): the
    runs start in their sandboxes, where the relative path named nothing."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["verify", "train.py", "--steps", "6", "--warmup", "1", "--repeats", "0",
                                       "--threads", "1", "--no-diff", "--workdir", "verify-out"])
    assert "original checked       reached --steps: 6 of 6 steps" in result.output, result.output
    assert "rewritten checked      reached --steps: 6 of 6 steps" in result.output
    assert "does not run" not in result.output
    [kept] = (tmp_path / "verify-out").iterdir()
    assert f"rewrites and logs kept in {kept}" in result.output  # named by its absolute path
    assert (kept / "00-train" / "rewritten" / "train.py").is_file()
    assert not (tmp_path / "train.py.ran").exists()  # the marker the script writes stayed in its sandbox
