"""Test-wide settings: every test gets its own results cache, never the repository's.

`gl` runs the command line the way a hostile test needs it: once with the results cache on
and once with it off (the cache reads files on its own path, so both must be exercised).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import pytest
from click.testing import CliRunner, Result

LINT_COMMANDS = ("check", "fix")


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path_factory.mktemp("gpulint-cache")
    monkeypatch.setenv("GPULINT_CACHE_DIR", str(directory))
    return directory


class Gpulint:
    """`gpulint ...` through click's runner, with or without the results cache."""

    def __init__(self, cache: bool, cache_dir: Path) -> None:
        self.cache = cache
        self.cache_dir = cache_dir

    def __repr__(self) -> str:
        return f"Gpulint(cache={self.cache})"

    def args(self, *args: Union[str, Path]) -> list[str]:
        """The arguments with `--no-cache` added after a lint command when the cache is off."""
        out = [str(a) for a in args]
        if out and out[0] in LINT_COMMANDS and not self.cache:
            out.insert(1, "--no-cache")
        return out

    def __call__(self, *args: Union[str, Path], input: Optional[Union[str, bytes]] = None) -> Result:
        from gpulint.cli import main

        return CliRunner().invoke(main, self.args(*args), input=input, catch_exceptions=False)

    def check(self, *args: Union[str, Path]) -> Result:
        return self("check", *args)

    def fix(self, *args: Union[str, Path]) -> Result:
        return self("fix", *args)


@pytest.fixture(params=[True, False], ids=["cache", "no-cache"])
def gl(request: pytest.FixtureRequest, _private_cache_dir: Path) -> Gpulint:
    return Gpulint(request.param, _private_cache_dir)
