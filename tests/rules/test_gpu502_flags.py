"""GPU502's `runs-by-default` premise: DataParallel behind a multi-GPU flag the project leaves off, which no
shell script the project ships to run that parser passes, is a path the project does not take
(LTSF-Linear's `--use_multi_gpu`); without such scripts the flag is an option users are offered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.test_project import findings, write

RUN = """\
import argparse

from exp import Exp

parser = argparse.ArgumentParser()
parser.add_argument("--use_gpu", type=bool, default=True)
parser.add_argument("--use_multi_gpu", action="store_true", help="use multiple gpus", default=DEFAULT)
args = parser.parse_args()
Exp(args).train()
"""
EXP = """\
import torch
from torch import nn


class Exp:
    def __init__(self, args):
        self.args = args
        model = nn.Linear(512, 512).cuda()
        if self.args.use_multi_gpu and self.args.use_gpu:
            model = nn.DataParallel(model)
        self.model = model

    def train(self):
        optimizer = torch.optim.Adam(self.model.parameters())
        for x, y in loader:
            loss = nn.functional.mse_loss(self.model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
"""


@pytest.mark.parametrize(("default", "script", "shown"), [
    ("False", None, True),  # no shipped script: how the project is run is not shown, the flag is an option
    ("False", "python -u run.py --is_training 1 --use_gpu True\n", False),  # its scripts run without it
    ("False", "python other.py --lr 0.1\n", True),  # a script that runs another parser says nothing
    ("False", "python -u run.py \\\n  --use_multi_gpu --devices 0,1\n", True),  # a shipped script asks for it
    ("False", "python run.py --use-multi-gpu\n", True),  # dashes spell the same dest
    ("True", None, True),  # on by default
])
def test_data_parallel_behind_a_flag(tmp_path: Path, default: str, script: str, shown: bool) -> None:
    files = {"run.py": RUN.replace("DEFAULT", default), "exp.py": EXP}
    if script is not None:
        files["scripts/long/run.sh"] = script
    write(tmp_path, files)
    expected = [("exp.py", 10, "GPU502")] if shown else []
    assert findings(tmp_path, "--select", "GPU502") == expected


def test_data_parallel_not_behind_a_flag_is_reported(tmp_path: Path) -> None:
    unguarded = EXP.replace("if self.args.use_multi_gpu and self.args.use_gpu:", "if self.args.use_gpu:")
    write(tmp_path, {"run.py": RUN.replace("DEFAULT", "False"), "exp.py": unguarded})
    assert findings(tmp_path, "--select", "GPU502") == [("exp.py", 10, "GPU502")]
