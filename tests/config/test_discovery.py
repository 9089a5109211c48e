"""Which configuration applies to a file: closest wins, extend, --config, --isolated, caching."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpulint.config import CliOverrides, SettingsResolver
from gpulint.core.settings import ConfigError, Settings
from gpulint.rules.gpu001_missing_autocast import AMP_DTYPE
from gpulint.rules.gpu102_dataloader_without_workers import NUM_WORKERS


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/pyproject.toml, a nested project with its own gpulint.toml, and a pyproject without our table."""
    write(tmp_path / "pyproject.toml", '[tool.gpulint]\nignore = ["GPU102"]\nnum-workers = 8\n')
    write(tmp_path / "pkg" / "train.py", "")
    write(tmp_path / "nested" / "gpulint.toml", 'select = ["GPU201"]\n')
    write(tmp_path / "nested" / "deep" / "train.py", "")
    write(tmp_path / "other" / "pyproject.toml", '[project]\nname = "other"\n')
    write(tmp_path / "other" / "train.py", "")
    return tmp_path


def test_closest_config_wins(tree: Path) -> None:
    resolver = SettingsResolver()
    root = resolver.for_path(tree / "pkg" / "train.py")
    assert root.ignore == ("GPU102",) and root.value(NUM_WORKERS) == 8
    nested = resolver.for_path(tree / "nested" / "deep" / "train.py")
    # the nested file does not merge with the root one: defaults for everything it does not say
    assert nested.select == ("GPU201",) and nested.ignore == () and nested.value(NUM_WORKERS) == 4
    assert resolver.project_for(tree / "nested" / "deep" / "train.py").path == tree / "nested" / "gpulint.toml"


def test_pyproject_without_table_is_skipped(tree: Path) -> None:
    resolver = SettingsResolver()
    assert resolver.project_for(tree / "other" / "train.py").path == tree / "pyproject.toml"


def test_gpulint_toml_beats_pyproject_in_the_same_directory(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.gpulint]\nnum-workers = 2\n')
    write(tmp_path / "gpulint.toml", "num-workers = 3\n")
    assert SettingsResolver().for_path(tmp_path / "a.py").value(NUM_WORKERS) == 3


def test_extend_inherits_and_overrides(tmp_path: Path) -> None:
    write(tmp_path / "base" / "gpulint.toml",
          'ignore = ["GPU102"]\nextend-select = ["GPU3"]\namp-dtype = "bfloat16"\nnum-workers = 6\n'
          'extend-exclude = ["gen"]\n')
    write(tmp_path / "app" / "pyproject.toml",
          '[tool.gpulint]\nextend = "../base/gpulint.toml"\nnum-workers = 2\nextend-select = ["GPU2"]\n'
          'extend-exclude = ["vendored"]\n')
    resolver = SettingsResolver()
    settings = resolver.for_path(tmp_path / "app" / "x.py")
    assert settings.value(AMP_DTYPE) == "bfloat16"  # inherited
    assert settings.value(NUM_WORKERS) == 2  # overridden
    assert settings.ignore == ("GPU102",)
    assert settings.extend_select == ("GPU3", "GPU2")  # extend-select adds up
    project = resolver.project_for(tmp_path / "app" / "x.py")
    assert project.sources == (tmp_path / "app" / "pyproject.toml", tmp_path / "base" / "gpulint.toml")
    assert project.is_excluded(tmp_path / "app" / "gen" / "a.py")
    assert project.is_excluded(tmp_path / "app" / "vendored" / "a.py")


def test_select_in_extending_file_starts_over(tmp_path: Path) -> None:
    write(tmp_path / "base.toml", 'ignore = ["GPU102"]\nextend-select = ["GPU3"]\n')
    write(tmp_path / "gpulint.toml", 'extend = "base.toml"\nselect = ["GPU102"]\n')
    settings = SettingsResolver().for_path(tmp_path / "x.py")
    assert settings.select == ("GPU102",) and settings.ignore == () and settings.extend_select == ()
    assert settings.is_enabled("GPU102") and not settings.is_enabled("GPU101")


def test_extend_cycle_and_missing_file_are_errors(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", 'extend = "b.toml"\n')
    write(tmp_path / "b.toml", 'extend = "a.toml"\n')
    write(tmp_path / "gpulint.toml", 'extend = "a.toml"\n')
    with pytest.raises(ConfigError, match="cycle"):
        SettingsResolver().for_path(tmp_path / "x.py")
    write(tmp_path / "gpulint.toml", 'extend = "missing.toml"\n')
    with pytest.raises(ConfigError, match=r"gpulint\.toml.*extend.*no such file"):
        SettingsResolver().for_path(tmp_path / "x.py")


def test_config_flag_and_isolated(tree: Path, tmp_path: Path) -> None:
    explicit = write(tmp_path / "elsewhere" / "ci.toml", "num-workers = 16\n")
    resolver = SettingsResolver(config_file=explicit)
    assert resolver.for_path(tree / "nested" / "deep" / "train.py").value(NUM_WORKERS) == 16
    assert resolver.for_path(tree / "pkg" / "train.py").value(NUM_WORKERS) == 16
    isolated = SettingsResolver(isolated=True)
    assert isolated.for_path(tree / "pkg" / "train.py") == Settings()
    with pytest.raises(ConfigError, match="not found"):
        SettingsResolver(config_file=tmp_path / "nope.toml")


def test_command_line_beats_configuration(tree: Path) -> None:
    resolver = SettingsResolver(CliOverrides(select=("GPU102",)))
    settings = resolver.for_path(tree / "pkg" / "train.py")
    # config ignores GPU102, the command line selects it: the command line wins (as in ruff,
    # whose command-line selection is a layer on top of the configuration's)
    assert settings.is_enabled("GPU102") and not settings.is_enabled("GPU101")
    resolver = SettingsResolver(CliOverrides(extend_select=("GPU3",), ignore=("GPU201",)))
    settings = resolver.for_path(tree / "pkg" / "train.py")
    assert not settings.is_enabled("GPU102") and not settings.is_enabled("GPU201")  # config's, and ours
    assert settings.is_enabled("GPU302") and settings.is_enabled("GPU101")


def test_per_file_ignores_relative_to_the_config_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.gpulint.per-file-ignores]\n"tests/**" = ["GPU1"]\n'
          '"conftest.py" = ["GPU201"]\n"scripts" = ["GPU102"]\n')
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "tests" / "unit" / "t.py").per_file_ignores == ("GPU1",)
    assert resolver.for_path(tmp_path / "src" / "conftest.py").per_file_ignores == ("GPU201",)
    assert resolver.for_path(tmp_path / "scripts" / "a" / "run.py").per_file_ignores == ("GPU102",)
    assert resolver.for_path(tmp_path / "src" / "tests.py").per_file_ignores == ()
    settings = resolver.for_path(tmp_path / "tests" / "t.py")
    # a per-file ignore beats even an exact selection
    assert not dataclasses.replace(settings, select=("GPU101",)).is_enabled("GPU101")


def test_exclude_and_force_exclude(tmp_path: Path) -> None:
    write(tmp_path / "gpulint.toml", 'exclude = ["legacy", "gen/*.py"]\n')
    resolver = SettingsResolver()
    assert resolver.is_excluded(tmp_path / "legacy" / "a.py")
    assert resolver.is_excluded(tmp_path / "gen" / "a.py")
    assert not resolver.is_excluded(tmp_path / "gen" / "sub" / "a.py")
    assert not resolver.is_excluded(tmp_path / "src" / "a.py")
    assert not resolver.is_excluded(tmp_path / "legacy" / "a.py", explicit=True)
    assert SettingsResolver(force_exclude=True).is_excluded(tmp_path / "legacy" / "a.py", explicit=True)
    write(tmp_path / "gpulint.toml", 'exclude = ["legacy"]\nforce-exclude = true\n')
    assert SettingsResolver().is_excluded(tmp_path / "legacy" / "a.py", explicit=True)


def test_each_directory_is_resolved_once(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpulint.config as config

    reads: list[Path] = []
    original = config.read_table

    def counting(path: Path):  # noqa: ANN202
        reads.append(path)
        return original(path)

    monkeypatch.setattr(config, "read_table", counting)
    resolver = SettingsResolver()
    for i in range(20):
        resolver.for_path(tree / "pkg" / f"f{i}.py")
        resolver.for_path(tree / "nested" / "deep" / f"f{i}.py")
    assert sorted(map(str, reads)) == sorted(map(str, [
        tree / "pyproject.toml", tree / "pyproject.toml",  # found (is there a table?), then loaded
        tree / "nested" / "gpulint.toml",
    ]))


def test_describe_names_the_source_and_values(tree: Path) -> None:
    text = SettingsResolver().describe(tree / "pkg" / "train.py")
    assert f"# configuration: {tree / 'pyproject.toml'}" in text
    assert 'ignore = ["GPU102"]' in text and "num-workers = 8" in text
    assert '"GPU101"' in text.split("enabled-rules = ")[1] and '"GPU102"' not in text.split("enabled-rules = ")[1]


@pytest.mark.parametrize(("path", "base", "expected"), [
    ("/p/a/b.py", "/p", "a/b.py"),
    ("/p/a/b.py", "/p/", "a/b.py"),
    ("/p", "/p", "."),
    ("/pa/b.py", "/p", None),  # a sibling whose name starts like the base is not below it
    ("/q/b.py", "/p", None),
    ("/p/b.py", "/", "p/b.py"),
    ("/p/b.py", "/p/./x/..", "b.py"),  # a base that is not normalised takes relpath's way
])
def test_a_path_relative_to_a_patterns_folder(path: str, base: str, expected: str) -> None:
    """The prefix shortcut answers as os.path.relpath does (patterns match on this relative path)."""
    from gpulint.config import _relative

    assert _relative(path, base) == expected
