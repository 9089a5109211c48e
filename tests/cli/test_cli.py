"""The command line as users run it: output, exit codes, fix, diff, rule docs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gpulint.cli import main

ROOT = Path(__file__).resolve().parents[2]

# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (see docs/fix-safety.md)
TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST
device = torch.device("cuda")
loader = DataLoader(MNIST(), batch_size=32)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for images, labels in loader:
    images = images.to(device)
"""
CLEAN = """\
import torch

x = torch.zeros(3)
"""


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_check_reports_sorted_lines_and_summary(project: Path) -> None:
    result = invoke("check", str(project))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    path = str(project / "train.py")
    assert lines[:3] == [
        f"{path}:5:10: GPU101 [*] DataLoader without pin_memory=True: its batches' copies to the GPU cannot run "
        "asynchronously",
        f"{path}:5:10: GPU102 DataLoader without worker processes: the GPU waits while each batch is prepared",
        f"{path}:6:13: GPU201 [*] AdamW without fused=True: a fused kernel would replace the loop over parameters",
    ]
    assert "Found 3 findings." in result.output
    assert "[*] 2 fixable with `gpulint fix`." in result.output
    assert "(1 more fixable with `gpulint fix --unsafe-fixes`.)" in result.output


def test_check_with_unsafe_fixes_counts_them_as_ruff_does(project: Path) -> None:
    """With --unsafe-fixes every fix is fixable by the command that applies it: one count, marked `[*]`."""
    result = invoke("check", "--unsafe-fixes", str(project))
    assert result.exit_code == 1
    assert [line.split(": ")[1][:10] for line in result.output.splitlines()[:3]] == [
        "GPU101 [*]", "GPU102 [*]", "GPU201 [*]"]
    assert "[*] 3 fixable with `gpulint fix --unsafe-fixes`." in result.output
    assert "more fixable" not in result.output


def test_first_lines_of_messages_stay_short_and_notes_carry_the_rest(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    torch>=2.4\n")
    (tmp_path / "train.py").write_text(TRAIN + "scaler_class = torch.cuda.amp.GradScaler\n")
    result = invoke("check", "--show-fixes", str(tmp_path / "train.py"))
    findings = [line for line in result.output.splitlines() if ": GPU" in line]
    assert findings and all(len(line.split(": ", 1)[1]) <= 120 for line in findings)
    # why no fix is offered goes on a line of its own
    note = "    note: no fix: only calls, decorators and imports are rewritten; change this use by hand"
    assert note in result.output


def test_clean_file_exits_zero(project: Path) -> None:
    result = invoke("check", str(project / "clean.py"))
    assert result.exit_code == 0
    assert "All checks passed!" in result.output


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", str(tmp_path / "nope.py")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


@pytest.mark.parametrize(
    "args, codes",
    [
        (["--select", "GPU1"], {"GPU101", "GPU102"}),
        (["--select", "GPU1", "--ignore", "GPU102"], {"GPU101"}),
        (["--ignore", "GPU1"], {"GPU201"}),
        (["--select", "GPU201"], {"GPU201"}),
        (["--ignore", "GPU10", "--extend-select", "GPU101"], {"GPU101", "GPU201"}),
        (["--select", "gpu101, GPU201"], {"GPU101", "GPU201"}),
    ],
)
def test_select_and_ignore_by_code_or_prefix(project: Path, args: list[str], codes: set[str]) -> None:
    result = invoke("check", "--output-format", "json", *args, str(project / "train.py"))
    assert {f["code"] for f in json.loads(result.output)} == codes


def test_invalid_selector_is_a_usage_error(project: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--select", "E501", str(project)])
    assert result.exit_code == 2
    assert "invalid rule selector" in result.output


def test_json_follows_ruff_schema(project: Path) -> None:
    result = invoke("check", "--output-format", "json", str(project))
    data = json.loads(result.output)
    assert result.exit_code == 1
    first = data[0]
    assert set(first) >= {"code", "message", "filename", "location", "end_location", "fix", "url"}
    assert first["location"] == {"row": 5, "column": 10}
    assert first["end_location"] == {"row": 5, "column": 44}
    assert first["filename"] == str((project / "train.py").resolve())
    assert first["fix"]["applicability"] == "safe"
    assert first["fix"]["edits"] == [  # pinned memory, and the copy of its batches made asynchronous
        {"content": ", pin_memory=True", "location": {"row": 5, "column": 43},
         "end_location": {"row": 5, "column": 43}},
        {"content": ", non_blocking=True", "location": {"row": 8, "column": 30},
         "end_location": {"row": 8, "column": 30}},
    ]
    gpu102 = data[1]
    assert gpu102["fix"]["applicability"] == "unsafe"


def test_fix_applies_safe_fixes_only_and_is_idempotent(project: Path) -> None:
    target = project / "train.py"
    result = invoke("fix", str(target))
    assert result.exit_code == 1  # the unsafe GPU102 fix was not applied, so a finding remains
    text = target.read_text()
    assert "DataLoader(MNIST(), batch_size=32, pin_memory=True)" in text
    assert "lr=1e-3, fused=True)" in text
    assert "Fixed 2 findings." in result.output
    assert "Found 1 finding remaining." in result.output
    again = invoke("fix", str(target))
    assert target.read_text() == text
    assert "Fixed" not in again.output


def test_fix_with_unsafe_fixes_leaves_nothing(project: Path) -> None:
    target = project / "train.py"
    result = invoke("fix", "--unsafe-fixes", str(target))
    assert result.exit_code == 0
    assert "num_workers=min(4, os.cpu_count() or 1)" in target.read_text()
    assert invoke("check", str(target)).exit_code == 0


def test_diff_writes_nothing(project: Path) -> None:
    target = project / "train.py"
    result = invoke("check", "--diff", str(target))
    assert target.read_text() == TRAIN
    assert "+loader = DataLoader(MNIST(), batch_size=32, pin_memory=True)" in result.output
    assert "-loader = DataLoader(MNIST(), batch_size=32)" in result.output
    assert "num_workers" not in result.output  # unsafe fixes are not shown without --unsafe-fixes


def test_syntax_error_is_a_finding_and_other_files_are_still_linted(project: Path) -> None:
    (project / "broken.py").write_text("def train(:\n    torch.manual_seed(0)\n")
    result = invoke("check", "--output-format", "json", str(project))
    data = json.loads(result.output)
    assert result.exit_code == 1
    broken = [f for f in data if f["filename"].endswith("broken.py")]
    assert [f["code"] for f in broken] == ["GPU000"]
    assert broken[0]["location"]["row"] == 1
    assert any(f["filename"].endswith("train.py") for f in data)


def test_output_is_deterministic(project: Path) -> None:
    for index in range(12):
        shutil.copy(project / "train.py", project / f"copy_{index:02d}.py")
    first = invoke("check", "--jobs", "2", str(project)).output
    second = invoke("check", "--jobs", "1", str(project)).output
    assert first == second
    paths = [line.split(":")[0] for line in first.splitlines() if ": GPU" in line]
    assert paths == sorted(paths)


def test_directory_discovery_skips_venvs_and_gitignored(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    for rel in [".venv/lib/x.py", "build/x.py", "generated/x.py", "api_pb2.py", "src/train.py"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TRAIN)
    result = invoke("check", "--output-format", "json", str(tmp_path))
    files = {Path(f["filename"]).relative_to(tmp_path.resolve()).as_posix() for f in json.loads(result.output)}
    assert files == {"src/train.py"}
    # an explicit file argument is always linted
    explicit = invoke("check", "--output-format", "json", str(tmp_path / "generated" / "x.py"))
    assert json.loads(explicit.output)


def test_rule_docs() -> None:
    result = invoke("rule", "GPU101")
    assert result.exit_code == 0
    for heading in ("# dataloader-without-pin-memory (GPU101)", "## What it does", "## Why is this bad?",
                    "## Example", "Use instead:", "## Fix safety"):
        assert heading in result.output
    assert invoke("rule", "dataloader-without-pin-memory").output == result.output


def test_rule_table_lists_every_rule() -> None:
    from gpulint.rules import all_rules

    result = invoke("rule", "--all")
    for rule in all_rules():
        assert f"| {rule.code} | {rule.name} |" in result.output


def test_unknown_rule_is_an_error() -> None:
    result = CliRunner().invoke(main, ["rule", "GPU999"])
    assert result.exit_code == 2


def test_installed_console_script(project: Path) -> None:
    exe = shutil.which("gpulint", path=os.path.dirname(sys.executable))
    assert exe is not None, "the gpulint console script is not installed next to this Python"
    proc = subprocess.run([exe, "check", str(project)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "GPU101" in proc.stdout
    assert proc.stderr == ""
    proc = subprocess.run([exe, "check", str(project / "missing")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_version_and_help_load_only_the_command_line_shell() -> None:
    """`gpulint --version` starts as fast as click allows: no rule, cache, configuration, LibCST or
    process pool is imported to parse the command line."""
    code = (
        "import sys; from gpulint.cli import main\n"
        "for args in (['--version'], ['check', '--help'], ['fix', '--help']):\n"
        "    try:\n        main(args)\n    except SystemExit as exc:\n        assert exc.code == 0, args\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('gpulint', 'libcst', 'multiprocessing',"
        " 'concurrent', 'tomllib')))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split("\n")[-2].split()
    # (gpulint.records: what makes the options' class a dataclass, when first used)
    assert loaded == ["gpulint", "gpulint.cli", "gpulint.cli.options", "gpulint.output", "gpulint.records"], loaded


def test_linting_never_imports_torch(project: Path) -> None:
    code = (
        "import sys; from gpulint.cli import main\n"
        "try:\n    main(['check', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'linting imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(project)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
