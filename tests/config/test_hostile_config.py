"""Hostile tests, configuration files: a broken file is exit 2 with its name and the problem,
in one line, never an internal error (issue 10, item 19). Runs with the results cache on and off.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest

from tests.conftest import Gpulint

TRAIN = ("import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
         "loader = DataLoader(MNIST())\nfor x, y in loader:\n    x = x.to('cuda')\n")

BROKEN = {
    "invalid-utf8": (b'[tool.gpulint]\nignore = ["GPU102"]  # caf\xe9\n', "not valid UTF-8 (at byte 41)"),
    "utf16": (codecs.BOM_UTF16_LE + '[tool.gpulint]\nignore = ["GPU102"]\n'.encode("utf-16-le"),
              "UTF-16; TOML files must be UTF-8"),
    "nested-arrays": (b"[tool.gpulint]\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    "nested-tables": (b"[tool.gpulint]\nx = " + b"{a=" * 3000 + b"1" + b"}" * 3000 + b"\n", "nested too deeply"),
    "nul": (b"[tool.gpulint]\x00\n", "invalid TOML"),
}


@pytest.mark.parametrize("name", ["pyproject.toml", "gpulint.toml"])
@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("where", ["discovered", "parent", "--config", "extended"])
def test_a_broken_configuration_file_is_named_in_one_line(gl: Gpulint, tmp_path: Path, name: str, case: str,
                                                         where: str) -> None:
    raw, problem = BROKEN[case]
    if name == "gpulint.toml":
        raw = raw.replace(b"[tool.gpulint]\n", b"").replace("[tool.gpulint]\n".encode("utf-16-le"), b"")
        problem = problem.replace("byte 41", "byte 26")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(TRAIN)
    config = {"discovered": project / "src" / name, "parent": project / name,
              "--config": tmp_path / "ci" / name, "extended": tmp_path / "base" / name}[where]
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(raw)
    args = ["check", str(project / "src" / "train.py")]
    if where == "--config":
        args[1:1] = ["--config", str(config)]
    if where == "extended":
        (project / "gpulint.toml").write_text(f'extend = "{config}"\n')
    result = gl(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpulint: error: {config}: ") and problem in line, line
    if where == "discovered":
        shown = gl("show-config", str(project / "src" / "train.py"))
        assert shown.exit_code == 2 and problem in shown.stderr


def test_a_utf8_bom_is_accepted(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "gpulint.toml").write_bytes(codecs.BOM_UTF8 + b'ignore = ["GPU101"]\n')
    (tmp_path / "train.py").write_text(TRAIN.replace("import torch\n", "import torch\ndevice = torch.device('cuda')\n"))
    result = gl.check(tmp_path / "train.py")
    assert result.exit_code == 1 and "GPU101" not in result.stdout and "GPU102" in result.stdout


def test_a_huge_configuration_file_is_refused_not_read(gl: Gpulint, tmp_path: Path) -> None:
    config = tmp_path / "gpulint.toml"
    with open(config, "wb") as handle:
        handle.write(b"# comment\n")
        handle.truncate(4 << 30)  # sparse
    (tmp_path / "train.py").write_text(TRAIN)
    result = gl.check(tmp_path / "train.py")
    assert result.exit_code == 2 and f"{config}: " in result.stderr and "too large" in result.stderr


# -- issue 22, item 14: a message says what is wrong, not something near it ------------------------

def _not_a_file(kind: str, where: Path) -> Path:
    """A FIFO or a device where a configuration file is expected (made here, or /dev/null)."""
    if kind == "device":
        return Path("/dev/null")
    path = where / "base.toml"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind, reason", [("fifo", "not a regular file (a FIFO)"),
                                          ("device", "not a regular file (a character device)")])
def test_config_or_extend_that_is_not_a_file_says_so(gl: Gpulint, tmp_path: Path, kind: str, reason: str) -> None:
    """`--config /dev/null` said "configuration file not found"; `extend` to a FIFO "no such file"."""
    (tmp_path / "train.py").write_text(TRAIN)
    target = _not_a_file(kind, tmp_path)
    result = gl("check", "--config", str(target), str(tmp_path / "train.py"))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"gpulint: error: {target}: cannot read configuration: {reason}"]
    (tmp_path / "gpulint.toml").write_text(f'extend = "{target}"\n')
    result = gl("check", str(tmp_path / "train.py"))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"gpulint: error: {tmp_path / 'gpulint.toml'}: (top level) extend: {target}: {reason}"]


def test_missing_config_and_extend_still_say_not_found(gl: Gpulint, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    result = gl("check", "--config", str(tmp_path / "nope.toml"), str(tmp_path / "train.py"))
    assert result.stderr.splitlines() == [f"gpulint: error: {tmp_path / 'nope.toml'}: configuration file not found"]
    (tmp_path / "gone.toml").symlink_to(tmp_path / "nowhere.toml")
    (tmp_path / "gpulint.toml").write_text('extend = "gone.toml"\n')
    result = gl("check", str(tmp_path / "train.py"))
    assert result.exit_code == 2 and result.stderr.endswith(
        f"extend: {tmp_path / 'gone.toml'}: a link to a file that does not exist\n"), result.stderr
