"""The text prefilter: files no rule can match are not parsed, and it never hides a finding."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from gpulint.analysis.device import GPU_EVIDENCE_TEXT
from gpulint.core.settings import Settings
from gpulint.engine import libcst_pass
from gpulint.engine.linter import lint_text
from gpulint.project.facts import facts_of_text
from tests.engine.test_properties import ALL, ci, training_programs

PATH = Path("train.py")

STEP = """\
import torch
for x, y in loader:
    loss = model(x)
    loss.backward()
    optimizer.step()
"""


def test_gpu_only_rules_do_not_parse_files_without_gpu_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parse(text: str):  # noqa: ANN202
        raise AssertionError("parsed a file no rule can match")

    monkeypatch.setattr(libcst_pass, "parse", no_parse)
    assert lint_text(PATH, STEP, Settings(select=("GPU001",))).findings == []


def test_gpu_only_rules_still_fire_with_gpu_evidence() -> None:
    text = STEP.replace("import torch\n", "import torch\nmodel = model.cuda()\n")
    codes = [f.code for f in lint_text(PATH, text, Settings(select=("GPU001",))).findings]
    assert codes == ["GPU001"]


@ci(150)
@given(training_programs())
def test_gpu_evidence_always_spells_a_needle(text: str) -> None:
    facts = facts_of_text(text)
    if facts is not None and facts.gpu:
        assert GPU_EVIDENCE_TEXT.search(text)


@ci(150)
@given(training_programs())
def test_prefilter_never_changes_findings(text: str) -> None:
    with_prefilter = lint_text(PATH, text, ALL).findings
    everything = lint_text(PATH, text + "\n# cuda nccl accelerator device_ids DataLoader Adam SGD Adagrad "
                           "backward autocast cuda.amp checkpoint Sequential ModuleList\n", ALL).findings
    key = [(f.code, f.location, f.message) for f in with_prefilter]
    assert key == [(f.code, f.location, f.message) for f in everything]
