"""Hostile tests, cache entries: whatever sits in an entry, it is a miss, never an error
(issue 10, item 20). The run answers as without a cache, and the entry is rewritten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main

# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (docs/fix-safety.md)
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


def _good(key: str) -> dict:
    return {"key": key, "findings": [{
        "code": "GPU101", "name": "dataloader-without-pin-memory", "message": "m",
        "location": [5, 10], "end_location": [5, 20], "fix": None, "url": None, "noqa_rows": [5, 5]}]}


def _with(key: str, **changes: object) -> bytes:
    data = _good(key)
    data["findings"][0].update(changes)
    return json.dumps(data).encode()


DAMAGE = {
    "code-int": lambda k: _with(k, code=1),
    "message-null": lambda k: _with(k, message=None),
    "location-strings": lambda k: _with(k, location=["a", "b"]),
    "location-short": lambda k: _with(k, location=[1]),
    "location-bool": lambda k: _with(k, location=[True, 1]),
    "location-zero": lambda k: _with(k, location=[0, 0]),
    "end-location-dict": lambda k: _with(k, end_location={"row": 1}),
    "fix-string": lambda k: _with(k, fix="x"),
    "fix-bad-applicability": lambda k: _with(k, fix={"applicability": "maybe", "message": "m", "edits": []}),
    "fix-edits-short": lambda k: _with(k, fix={"applicability": "safe", "message": "m", "edits": [[1, 2]]}),
    "fix-edit-types": lambda k: _with(k, fix={"applicability": "safe", "message": "m",
                                              "edits": [["a", 2, "x", 1, 1, 1, 1]]}),
    "fix-edit-backwards": lambda k: _with(k, fix={"applicability": "safe", "message": "m",
                                                  "edits": [[9, 2, "x", 1, 1, 1, 1]]}),
    "noqa-rows-string": lambda k: _with(k, noqa_rows="ab"),
    "finding-list": lambda k: json.dumps({"key": k, "findings": [[1, 2]]}).encode(),
    "findings-dict": lambda k: json.dumps({"key": k, "findings": {"a": 1}}).encode(),
    "deep": lambda k: b'{"key": "' + k.encode() + b'", "findings": ' + b"[" * 100000 + b"]" * 100000 + b"}",
    "huge-number": lambda k: _with(k, location=[10 ** 400, 1]),
    "nan": lambda k: _with(k, location=[float("nan"), 1]),
    "not-utf8": lambda k: b'{"key": "' + k.encode() + b'", "findings": ["\xff"]}',
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_damaged_entry_is_a_miss(tmp_path: Path, damage: str, command: str) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    cache = tmp_path / "cache"
    args = ["check", "--cache-dir", str(cache), "--output-format", "json", str(path)]
    runner = CliRunner()
    expected = runner.invoke(main, args, catch_exceptions=False)
    [entry] = list(cache.glob("v1/*/*.json"))
    entry.write_bytes(DAMAGE[damage](entry.stem))
    result = runner.invoke(main, [command] + args[1:], catch_exceptions=False)
    assert "internal error" not in result.output and "Traceback" not in result.output
    if command == "check":
        assert (result.exit_code, result.stdout) == (expected.exit_code, expected.stdout)
        assert json.loads(entry.read_bytes())["key"] == entry.stem, "the damaged entry was not rewritten"
    else:
        assert result.exit_code == 1 and "pin_memory=True" in path.read_text()


def test_an_entry_that_is_a_directory_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    cache = tmp_path / "cache"
    args = ["check", "--cache-dir", str(cache), str(path)]
    expected = CliRunner().invoke(main, args, catch_exceptions=False)
    [entry] = list(cache.glob("v1/*/*.json"))
    entry.unlink()
    entry.mkdir()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert (result.exit_code, result.stdout) == (expected.exit_code, expected.stdout)
