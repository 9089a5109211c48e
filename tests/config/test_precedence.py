"""The command line beats every configuration file (issue 10, item 14), tested exhaustively.

Rule selection is two layers, as in ruff: the configuration's, then the command line's.
Within a layer the most specific selector wins and `ignore` wins a tie; a layer with a
`select` starts the selection over, a layer without one changes only the rules it names.
Per-file ignores and `# noqa` comments still apply to every selection (as in ruff).

The table below is checked against a reference model written differently (set updates in
order of specificity) over every combination of configuration and command-line selectors.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Optional

import pytest

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.rules import rule_codes
from tests.conftest import Gpulint

PREVIEW = {"GPU301"}
STABLE = [code for code in rule_codes() if code not in PREVIEW]

CONFIG_SELECT = [None, ("GPU1",), ("GPU101",), ("GPU2",), ("ALL",)]
CONFIG_IGNORE = [None, ("GPU101",), ("GPU1",)]
CONFIG_EXTEND = [None, ("GPU101",), ("GPU3",)]
CLI_SELECT = [None, ("GPU101",), ("GPU1",), ("GPU201",)]
CLI_IGNORE = [None, ("GPU101",), ("GPU1",), ("GPU",)]
CLI_EXTEND = [None, ("GPU102",), ("GPU101",), ("GPU30",)]


def _specificity(selector: str) -> int:
    return -1 if selector == "ALL" else len(selector)


def _expand(selector: str) -> set[str]:
    return {c for c in STABLE if selector == "ALL" or c.startswith(selector)}


def _layer(current: set[str], select: Optional[tuple[str, ...]], extend: tuple[str, ...],
           ignore: tuple[str, ...]) -> set[str]:
    """Ruff's documented algorithm: start over on `select`, then apply the selectors from the
    least to the most specific, an ignore after a select of equal specificity."""
    result = set() if select is not None else set(current)
    updates = [(_specificity(s), 0, s) for s in (select or ()) + extend] + [(_specificity(s), 1, s) for s in ignore]
    for _, is_ignore, selector in sorted(updates):
        result = result - _expand(selector) if is_ignore else result | _expand(selector)
    return result


def reference(config: tuple, cli: tuple) -> set[str]:
    c_select, c_ignore, c_extend = config
    enabled = _layer(set(), c_select or ("ALL",), c_extend or (), c_ignore or ())
    s_select, s_ignore, s_extend = cli
    if s_select is None and s_ignore is None and s_extend is None:
        return enabled
    return _layer(enabled, s_select, s_extend or (), s_ignore or ())


def _toml(key: str, value: Optional[tuple[str, ...]]) -> str:
    return "" if value is None else f"{key} = [{', '.join(repr(v) for v in value)}]\n".replace("'", '"')


CONFIGS = list(itertools.product(CONFIG_SELECT, CONFIG_IGNORE, CONFIG_EXTEND))
CLIS = list(itertools.product(CLI_SELECT, CLI_IGNORE, CLI_EXTEND))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "cfg:" + ",".join("-".join(v or ["_"]) for v in c))
def test_every_combination_of_configuration_and_command_line(tmp_path: Path, config: tuple) -> None:
    select, ignore, extend = config
    (tmp_path / "gpulint.toml").write_text(_toml("select", select) + _toml("ignore", ignore)
                                           + _toml("extend-select", extend))
    path = tmp_path / "train.py"
    for cli in CLIS:
        s_select, s_ignore, s_extend = cli
        resolver = SettingsResolver(CliOverrides(select=s_select, ignore=s_ignore, extend_select=s_extend))
        settings = resolver.for_path(path)
        enabled = {code for code in STABLE if settings.is_enabled(code)}
        assert enabled == reference(config, cli), (config, cli)


# The cases people write down, spelled out -------------------------------------------------------

@pytest.mark.parametrize("config, cli, on, off", [
    # the case: a configuration ignore never silently beats a command-line select
    ('ignore = ["GPU101"]', ["--select", "GPU101"], {"GPU101"}, {"GPU102", "GPU201"}),
    ('ignore = ["GPU1"]', ["--select", "GPU101"], {"GPU101"}, {"GPU102"}),
    # a command-line ignore beats a more specific configuration extend-select
    ('extend-select = ["GPU101"]', ["--ignore", "GPU1"], {"GPU201"}, {"GPU101", "GPU102"}),
    # a command-line select drops the configuration's extend-select
    ('select = ["GPU2"]\nextend-select = ["GPU101"]', ["--select", "GPU102"], {"GPU102"}, {"GPU101", "GPU201"}),
    # a command-line extend-select adds to the configuration's selection, beating its ignore
    ('select = ["GPU2"]\nignore = ["GPU102"]', ["--extend-select", "GPU102"], {"GPU102", "GPU201"}, {"GPU101"}),
    # without command-line selectors the configuration stands
    ('select = ["GPU1"]\nignore = ["GPU102"]', [], {"GPU101"}, {"GPU102", "GPU201"}),
])
def test_precedence_end_to_end(gl: Gpulint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str,
                               cli: list[str], on: set[str], off: set[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n" + config + "\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
        "device = torch.device('cuda')\nloader = DataLoader(MNIST())\nopt = torch.optim.AdamW(model.parameters())\n"
        "for x in loader:\n    x = x.to(device, non_blocking=True)\n")
    result = gl.check(*cli, "train.py")
    found = {line.split(": ")[1].split()[0] for line in result.stdout.splitlines() if line.startswith("train.py:")}
    assert on <= found and not (off & found), (found, result.output)


def test_per_file_ignores_still_apply_to_a_command_line_select(tmp_path: Path) -> None:
    (tmp_path / "gpulint.toml").write_text('[per-file-ignores]\n"tests/**" = ["GPU101"]\n')
    resolver = SettingsResolver(CliOverrides(select=("GPU101",)))
    assert not resolver.for_path(tmp_path / "tests" / "test_x.py").is_enabled("GPU101")
    assert resolver.for_path(tmp_path / "src" / "x.py").is_enabled("GPU101")


@pytest.mark.parametrize("config_preview, cli_preview, expected", [
    (None, None, False), (True, None, True), (False, True, True), (True, False, False), (None, True, True),
])
def test_preview_on_the_command_line_beats_configuration(tmp_path: Path, config_preview: Optional[bool],
                                                         cli_preview: Optional[bool], expected: bool) -> None:
    if config_preview is not None:
        (tmp_path / "gpulint.toml").write_text(f"preview = {str(config_preview).lower()}\n")
    settings = SettingsResolver(CliOverrides(preview=cli_preview)).for_path(tmp_path / "x.py")
    assert settings.is_enabled("GPU301", preview_rule=True) is expected


@pytest.mark.parametrize("config, cli, expected", [
    ('select = ["GPU301"]', CliOverrides(), True),  # a preview rule selected by its exact code runs
    ('select = ["GPU301"]', CliOverrides(select=("GPU3",)), False),  # the command line started over
    ("", CliOverrides(extend_select=("GPU301",)), True),
    ("", CliOverrides(select=("GPU3",)), False),  # a prefix does not opt in to preview
    ('extend-select = ["GPU301"]', CliOverrides(ignore=("GPU3",)), False),
])
def test_preview_rules_need_their_exact_code_in_the_selection_in_force(tmp_path: Path, config: str,
                                                                      cli: CliOverrides, expected: bool) -> None:
    (tmp_path / "gpulint.toml").write_text(config + "\n")
    settings = SettingsResolver(cli).for_path(tmp_path / "x.py")
    assert settings.is_enabled("GPU301", preview_rule=True) is expected
