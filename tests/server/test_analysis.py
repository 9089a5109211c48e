"""The server's view of a buffer, without the protocol: positions, editor settings, fix-all edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.config import ConfigError
from gpulint.core.edits import apply_edits
from gpulint.server.analysis import EditorSettings, Positions, fix_all_edits, lint_buffer, noqa_edits

TEXT = 'x = "🚀é"; y = 1\r\nz = 2\n'


@pytest.mark.parametrize("encoding, column", [("utf-16", 11), ("utf-32", 10), ("utf-8", 14)])
def test_positions_count_in_the_negotiated_encoding(encoding: str, column: int) -> None:
    positions = Positions(TEXT, encoding)
    offset = TEXT.index("y")
    assert positions.position(offset) == (0, column)
    assert positions.offset(0, column) == offset
    assert positions.position(TEXT.index("z")) == (1, 0) and positions.offset(1, 0) == TEXT.index("z")
    assert positions.offset(0, 999) == TEXT.index("\r") and positions.offset(9, 0) == len(TEXT)


def test_editor_settings_read_like_the_command_line() -> None:
    settings = EditorSettings.from_client({"gpulint": {"select": ["GPU1"], "ignore": "GPU102", "preview": True}})
    assert settings.select == ("GPU1",) and settings.ignore == ("GPU102",) and settings.preview is True
    assert EditorSettings.from_client(None) == EditorSettings()
    with pytest.raises(ConfigError, match="unknown rule code 'GPU110'"):
        EditorSettings.from_client({"ignore": ["GPU110"]})


def test_fix_all_applies_safe_fixes_only(tmp_path: Path) -> None:
    text = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ntorch.device('cuda')\n"
            "ds = TensorDataset(torch.randn(4, 2))\nloader = DataLoader(ds)\nopt = torch.optim.SGD([], lr=1)\n"
            "for (x,) in loader:\n    x = x.to('cuda', non_blocking=True)\n")
    path = tmp_path / "train.py"
    codes = sorted(f.code for f in lint_buffer(path, text, EditorSettings()).findings)
    assert codes == ["GPU101", "GPU201"]
    fixed = apply_edits(text, fix_all_edits(path, text, EditorSettings()))
    assert "DataLoader(ds, pin_memory=True)" in fixed and "SGD([], lr=1)" in fixed  # SGD's fix is unsafe
    [finding] = [f for f in lint_buffer(path, text, EditorSettings()).findings if f.code == "GPU201"]
    assert "lr=1)  # noqa: GPU201\n" in apply_edits(text, noqa_edits(text, finding))
    (tmp_path / "gpulint.toml").write_text('extend-exclude = ["train.py"]\n')
    assert lint_buffer(path, text, EditorSettings()).excluded and fix_all_edits(path, text, EditorSettings()) == []
    (tmp_path / "gpulint.toml").write_text("num-workers = 'x'\n")
    assert "num-workers" in (lint_buffer(path, text, EditorSettings()).error or "")
