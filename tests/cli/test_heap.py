"""A big run freezes the long-lived heap while it lints, and leaves the collector as it found it."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpulint.cli import lint, main


def _tree(root: Path, files: int) -> Path:
    for i in range(files):
        (root / f"m{i}.py").write_text(f"x{i} = {i}\n")
    (root / "train.py").write_text("import torch\nopt = torch.optim.Adam(params)\ntorch.device('cuda')\n")
    return root


@pytest.mark.parametrize("freeze_from, frozen", [(3, True), (1000, False)])
def test_the_heap_is_frozen_only_while_a_big_run_lints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       freeze_from: int, frozen: bool) -> None:
    seen: list[int] = []
    real = lint.run_jobs

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_freeze_count())
        return real(*args, **kwargs)

    monkeypatch.setattr(lint, "FREEZE_FROM", freeze_from)
    monkeypatch.setattr(lint, "run_jobs", counted)
    before = gc.get_freeze_count()
    result = CliRunner().invoke(main, ["check", "--no-cache", "--isolated", "-j", "1", str(_tree(tmp_path, 5))])
    assert result.exit_code == 1, result.output
    assert (seen[-1] > before) is frozen
    assert gc.get_freeze_count() == before  # unfrozen after: an in-process caller's garbage stays collectable



def test_a_lint_run_collects_less_often_and_puts_the_thresholds_back(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint import cli

    seen: list[tuple[int, ...]] = []
    real = lint.run_jobs

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(lint, "run_jobs", counted)
    before = gc.get_threshold()
    result = CliRunner().invoke(main, ["check", "--no-cache", "--isolated", "-j", "1", str(_tree(tmp_path, 2))])
    assert result.exit_code == 1, result.output
    assert seen and set(seen) == {cli.RUN_THRESHOLDS}
    assert gc.get_threshold() == before  # an in-process caller keeps its collector
