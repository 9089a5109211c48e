"""Hostile tests of the language server drive it over its stdin, with its results cache on and off."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.server.wire import Wire


@pytest.fixture(params=[(), ("--no-cache",)], ids=["cache", "no-cache"])
def server_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return request.param


@pytest.fixture
def wire(tmp_path: Path, server_args: tuple[str, ...]) -> Iterator[Wire]:
    """`gpulint server` started in the test's folder, ended whatever state the test leaves it in."""
    server = Wire(tmp_path, server_args)
    try:
        yield server
    finally:
        server.close()
