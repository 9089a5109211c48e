"""The settings rules (GPU401, GPU402, GPU601) read backend settings across the project: a setting made
by a caller, by a module the file imports, or by a module a caller imports silences them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.project.facts import (
    SETTING_CHANNELS_LAST,
    SETTING_COMPILE,
    SETTING_CUDNN_BENCHMARK,
    SETTING_DETERMINISTIC,
    SETTING_MATMUL_PRECISION,
    facts_of_text,
)
from tests.analysis.test_project import findings, write

STEP = """\
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(("code", "kinds"), [
    ("import torch\ntorch.set_float32_matmul_precision('high')", {SETTING_MATMUL_PRECISION}),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", {SETTING_MATMUL_PRECISION}),
    ("import torch\ntorch.backends.cuda.matmul.fp32_precision = 'tf32'", {SETTING_MATMUL_PRECISION}),
    ("from torch.backends import cudnn\ncudnn.benchmark = True", {SETTING_CUDNN_BENCHMARK}),
    ("import torch\ntorch.backends.cudnn.deterministic = True", {SETTING_DETERMINISTIC}),
    ("import torch\ntorch.use_deterministic_algorithms(True)", {SETTING_DETERMINISTIC}),
    ("import torch\nmodel = torch.compile(model)", {SETTING_COMPILE}),
    ("from torch import compile\nmodel = compile(model)", {SETTING_COMPILE}),
    ("model.compile()", {SETTING_COMPILE}),
    ("import torch\nx = x.to(memory_format=torch.channels_last)", {SETTING_CHANNELS_LAST}),
    ("import re\npattern = re.compile('x')\nrun.benchmark = 3", set()),
])
def test_settings_a_file_makes(code: str, kinds: set[str]) -> None:
    facts = facts_of_text(code)
    assert facts is not None and set(facts.settings) == kinds


@pytest.mark.parametrize("where", ["caller", "imported", "imported by the caller"])
def test_a_matmul_precision_set_elsewhere_in_the_project_silences_gpu401(tmp_path: Path, where: str) -> None:
    setting = "import torch\n\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
    files = {"steps.py": STEP, "main.py": "from steps import train\n\ntrain(net, loader, opt)\n"}
    if where == "caller":
        files["main.py"] = setting + files["main.py"]
    elif where == "imported":
        files["setup.py"] = setting
        files["steps.py"] = "import setup\n" + STEP
    else:
        files["setup.py"] = setting
        files["main.py"] = "import setup\n" + files["main.py"]
    write(tmp_path, files)
    assert findings(tmp_path, "--select", "GPU401") == []
    (tmp_path / "setup.py").write_text("import torch\n", encoding="utf-8")
    (tmp_path / "main.py").write_text("import setup\nfrom steps import train\n\ntrain(net, loader, opt)\n",
                                      encoding="utf-8")
    assert findings(tmp_path, "--select", "GPU401") == [("steps.py", 8 + (where == "imported"), "GPU401")]


def test_an_opt_in_rule_runs_only_when_selected_by_its_code() -> None:
    from gpulint.core.settings import Settings

    assert not Settings(preview=True).is_enabled("GPU601", preview_rule=True, opt_in=True)
    assert not Settings(select=("ALL",), preview=True).is_enabled("GPU601", preview_rule=True, opt_in=True)
    assert not Settings(select=("GPU6",), preview=True).is_enabled("GPU601", preview_rule=True, opt_in=True)
    assert Settings(select=("GPU601",)).is_enabled("GPU601", preview_rule=True, opt_in=True)
    assert Settings(extend_select=("GPU601",)).is_enabled("GPU601", preview_rule=True, opt_in=True)
    assert not Settings(select=("GPU601",), ignore=("GPU601",)).is_enabled("GPU601", preview_rule=True, opt_in=True)
