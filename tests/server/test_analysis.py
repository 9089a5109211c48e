"""The server's view of a buffer, without the protocol: positions, editor settings, fix-all edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.core.edits import apply_edits
from gpulint.server import jobs
from gpulint.server.analysis import EditorSettings, Positions, noqa_edits, notebook_noqa_edits

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
    settings, problems = EditorSettings.read({"gpulint": {"select": ["GPU1"], "ignore": "GPU102", "preview": True}})
    assert settings.select == ("GPU1",) and settings.ignore == ("GPU102",) and settings.preview is True
    assert not problems
    assert EditorSettings.read(None) == (EditorSettings(), [])
    settings, [problem] = EditorSettings.read({"ignore": ["GPU110"], "select": ["GPU2"]})
    assert "gpulint.ignore: unknown rule code 'GPU110'" in problem and settings.select == ("GPU2",)


def test_fix_all_applies_safe_fixes_only(tmp_path: Path) -> None:
    text = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ntorch.device('cuda')\n"
            "ds = TensorDataset(torch.randn(4, 2))\nloader = DataLoader(ds)\nopt = torch.optim.SGD([], lr=1)\n"
            "for (x,) in loader:\n    x = x.to('cuda', non_blocking=True)\n")
    path = tmp_path / "train.py"
    settings = EditorSettings().resolver().for_path(path)
    findings = jobs.lint(path, text, settings, None)
    assert sorted(f.code for f in findings) == ["GPU101", "GPU201"]
    fixed = apply_edits(text, jobs.fix_all(path, text, settings, None))
    assert "DataLoader(ds, pin_memory=True)" in fixed and "SGD([], lr=1)" in fixed  # SGD's fix is unsafe
    [finding] = [f for f in findings if f.code == "GPU201"]
    assert "lr=1)  # noqa: GPU201\n" in apply_edits(text, noqa_edits(text, finding))


def test_a_notebooks_cells_are_linted_and_fixed_as_one_program(tmp_path: Path) -> None:
    cells = (("markdown", "# GPU101 in markdown"), ("code", "import torch\nfrom torch.utils.data import DataLoader"),
             ("code", "%%bash\necho hi"), ("code", "device = torch.device('cuda')\nloader = DataLoader([1, 2])"),
             ("code", "for x in loader:\n    x = x.to(device, non_blocking=True)"))
    path = tmp_path / "nb.ipynb"
    settings = EditorSettings().resolver().for_path(path)
    [finding] = jobs.lint_cells(path, cells, settings, None)
    assert finding.code == "GPU101" and finding.cell is not None and finding.cell.number == 4
    assert (finding.location.row, finding.location.column) == (2, 10)  # in the cell's own lines
    [noqa] = notebook_noqa_edits(cells, finding)[3]
    assert apply_edits(cells[3][1], [noqa]).endswith("DataLoader([1, 2])  # noqa: GPU101")
