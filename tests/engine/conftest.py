"""Fixtures shared by the engine tests."""

from __future__ import annotations

from typing import Callable

import pytest

from gpulint.engine import libcst_pass


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts handed to LibCST during the test."""
    seen: list[str] = []
    real: Callable = libcst_pass.parse

    def counting(text: str) -> object:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(libcst_pass, "parse", counting)
    return seen
