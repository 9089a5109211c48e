"""Fixes keep encoding, BOM, newline style and file mode, and write through symlinks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.core.source import SourceError, decode_source

BODY = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "from torchvision.datasets import MNIST\n"
    "# caf\u00e9 \u2014 donn\u00e9es\n"
    "ds = MNIST('data')  # CPU tensors: GPU101's fix is the safe one\n"
    "loader = DataLoader(ds)\n"
    "for x, y in loader:\n"
    "    x = x.to('cuda')\n"
)
# GPU101's fix pins the loader's memory and makes the copy of its batches asynchronous
PINNED = BODY.replace("DataLoader(ds)", "DataLoader(ds, pin_memory=True)").replace(
    "x.to('cuda')", "x.to('cuda', non_blocking=True)")


def run_fix(path: Path) -> None:
    result = CliRunner().invoke(main, ["fix", "--select", "GPU101", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_newline_style_is_kept(tmp_path: Path, newline: str) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(BODY.replace("\n", newline).encode())
    run_fix(path)
    data = path.read_bytes()
    assert data == PINNED.replace("\n", newline).encode()


def test_bom_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + BODY.encode())
    run_fix(path)
    assert path.read_bytes().startswith(b"\xef\xbb\xbfimport torch")
    assert b"pin_memory=True" in path.read_bytes()


def test_declared_latin1_encoding_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    text = "# -*- coding: latin-1 -*-\n" + BODY.replace("\u2014", "-")
    path.write_bytes(text.encode("latin-1"))
    run_fix(path)
    assert path.read_bytes() == text.replace("DataLoader(ds)", "DataLoader(ds, pin_memory=True)").replace(
        "x.to('cuda')", "x.to('cuda', non_blocking=True)").encode("latin-1")


def test_file_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(BODY)
    os.chmod(path, 0o750)
    run_fix(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750


def test_fix_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(BODY)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    run_fix(link)
    assert link.is_symlink()
    assert "pin_memory=True" in real.read_text()


def test_no_trailing_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(BODY.rstrip("\n"))
    run_fix(path)
    fixed = path.read_text()
    assert "DataLoader(ds, pin_memory=True)\n" in fixed and fixed.endswith("x = x.to('cuda', non_blocking=True)")


def test_undecodable_bytes_are_a_clear_error() -> None:
    with pytest.raises(SourceError, match="cannot decode as utf-8"):
        decode_source(b"x = '\xff\xfe'\n", Path("x.py"))
