"""Bad configuration is an error that names the key and the file; good values arrive typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.config import SettingsResolver
from gpulint.core.settings import ConfigError
from gpulint.rules.gpu001_missing_autocast import AMP_DTYPE
from gpulint.rules.gpu102_dataloader_without_workers import NUM_WORKERS
from gpulint.rules.gpu301_deep_stack_without_checkpointing import (
    CHECKPOINT_MIN_DEPTH,
    CHECKPOINT_UNKNOWN_DEPTH,
)


def resolve(tmp_path: Path, body: str, name: str = "pyproject.toml"):  # noqa: ANN201
    text = ("[tool.gpulint]\n" + body) if name == "pyproject.toml" else body
    (tmp_path / name).write_text(text)
    return SettingsResolver().for_path(tmp_path / "train.py")


def test_all_keys_typed(tmp_path: Path) -> None:
    settings = resolve(tmp_path, '''
select = ["GPU1", "gpu201"]
extend-select = ["GPU3"]
ignore = ["GPU102"]
preview = true
amp-dtype = "bfloat16"
num-workers = 2
checkpoint-min-depth = 12
checkpoint-unknown-depth = true
torch-version = "2.10"
exclude = ["a"]
extend-exclude = ["b"]
force-exclude = true
[tool.gpulint.per-file-ignores]
"x.py" = ["GPU1"]
''')
    assert settings.select == ("GPU1", "GPU201")
    assert settings.preview is True and settings.value(AMP_DTYPE) == "bfloat16"
    assert settings.value(NUM_WORKERS) == 2 and settings.value(CHECKPOINT_MIN_DEPTH) == 12
    assert settings.value(CHECKPOINT_UNKNOWN_DEPTH) is True
    assert settings.torch_version == (2, 10)


@pytest.mark.parametrize("body, key, problem", [
    ("nmu-workers = 2\n", "nmu-workers", "unknown key"),
    ("num_workers = 2\n", "num_workers", "did you mean 'num-workers'"),
    ('num-workers = "4"\n', "num-workers", "expected an integer >= 1"),
    ("num-workers = 0\n", "num-workers", "expected an integer >= 1"),
    ("num-workers = true\n", "num-workers", "expected an integer >= 1"),
    ('amp-dtype = "float32"\n', "amp-dtype", "expected one of 'auto', 'float16', 'bfloat16'"),
    ('strictness = "strict"\n', "strictness", "expected one of 'default', 'pedantic'"),
    ("torch-version = 2.4\n", "torch-version", "write it as a string"),
    ('torch-version = "two"\n', "torch-version", "MAJOR.MINOR"),
    ('select = "GPU101"\n', "select", "expected a list of strings"),
    ('select = ["PLE101"]\n', "select", "invalid rule selector"),
    ('preview = "yes"\n', "preview", "expected true or false"),
    ("checkpoint-min-depth = -1\n", "checkpoint-min-depth", "expected an integer >= 1"),
    ('per-file-ignores = ["x"]\n', "per-file-ignores", "expected a table"),
    ("extend = 3\n", "extend", "expected the path"),
])
def test_bad_values_name_key_and_file(tmp_path: Path, body: str, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, body)
    message = str(info.value)
    assert str(tmp_path / "pyproject.toml") in message
    assert f" {key}:" in message
    assert problem in message


def test_bad_per_file_codes_name_the_glob(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"per-file-ignores\.'tests/\*\*': invalid rule selector"):
        resolve(tmp_path, '[tool.gpulint.per-file-ignores]\n"tests/**" = ["nope"]\n')


def test_gpulint_toml_uses_top_level_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"gpulint\.toml: \(top level\) tool: unknown key"):
        resolve(tmp_path, "[tool.gpulint]\nnum-workers = 2\n", name="gpulint.toml")
    assert resolve(tmp_path, "num-workers = 3\n", name="gpulint.toml").value(NUM_WORKERS) == 3


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pyproject\.toml: invalid TOML"):
        resolve(tmp_path, "num-workers = = 2\n")
