"""Test-wide settings: every test gets its own results cache, never the repository's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path_factory.mktemp("gpulint-cache")
    monkeypatch.setenv("GPULINT_CACHE_DIR", str(directory))
    return directory
