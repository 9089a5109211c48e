"""Evidence for each premise, across the files of a project, and the strictness setting.

Each test writes a small project and runs the real CLI on it, as a user does. The single-file families
live in fixtures/rules; these are the ones whose evidence sits in another file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Premise, all_of, any_of, decide
from gpulint.core.settings import Settings
from gpulint.rules import all_rules
from tests.analysis.test_project import findings, write

ON_GPU = Premise("on-gpu", "the code runs on a GPU")
WIDE = Premise("wide", "the model is wide")


def test_a_finding_needs_every_premise_shown() -> None:
    assert decide({ON_GPU: SHOWN, WIDE: SHOWN}, pedantic=False).report
    assert not decide({ON_GPU: SHOWN, WIDE: UNDECIDED}, pedantic=False).report
    assert decide({ON_GPU: SHOWN, WIDE: UNDECIDED}, pedantic=True).undecided == (WIDE,)
    assert not decide({ON_GPU: REFUTED, WIDE: UNDECIDED}, pedantic=True).report  # refuted: never
    assert all_of(SHOWN, UNDECIDED) is UNDECIDED and all_of(SHOWN, REFUTED) is REFUTED
    assert any_of(UNDECIDED, SHOWN) is SHOWN and any_of(REFUTED, REFUTED) is REFUTED


@pytest.mark.parametrize("rule", [r for r in all_rules() if r.code in
                                  ("GPU001", "GPU002", "GPU003", "GPU101", "GPU102", "GPU201", "GPU301", "GPU302")],
                         ids=lambda r: r.code)
def test_each_rule_writes_its_premises_down(rule: type) -> None:
    premises = rule.docs.premises
    assert len(premises) >= 2 and len({p.key for p in premises}) == len(premises)
    assert all(p.text.endswith(".") and len(p.text) > 60 for p in premises)


def test_a_rule_cannot_judge_a_premise_its_docs_do_not_list() -> None:
    import libcst as cst

    from gpulint.core.context import FileContext
    from gpulint.rules.gpu201_non_fused_optimizer import NonFusedOptimizer

    rule = NonFusedOptimizer(FileContext(Path("x.py"), "", cst.parse_module(""), Settings()))
    with pytest.raises(ValueError, match="docs do not list: stray"):
        rule.decide({Premise("stray", "not documented"): SHOWN})


MODELS = """\
import torch
from torch import nn


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
"""

TRAIN_GCN = """\
import argparse

import torch
import torch.nn.functional as F

from models import GCN

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default={hidden})
args = parser.parse_args()
model = GCN(nfeat=features.shape[1], nhid=args.hidden, nclass=7).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, fused=True)
for epoch in range(200):
    optimizer.zero_grad()
    loss = F.nll_loss(model(features, adj), labels)
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("hidden, reported", [(16, False), (512, True)])
def test_the_width_of_a_model_defined_in_another_module(tmp_path: Path, hidden: int, reported: bool) -> None:
    """pygcn: the layers live in models.py, the hidden width is the training script's option."""
    write(tmp_path, {"models.py": MODELS, "train.py": TRAIN_GCN.replace("{hidden}", str(hidden))})
    found = findings(tmp_path, "--select", "GPU001")
    assert (("train.py", 16, "GPU001") in found) is reported


LLAMA = """\
from dataclasses import dataclass

from torch import nn


@dataclass
class ModelArgs:
    dim: int = 4096
    n_layers: int = 32


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.fc = nn.Linear(args.dim, args.dim)

    def forward(self, x):
        return self.fc(x)


class Transformer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.layers = nn.ModuleList([Block(args) for _ in range(args.n_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
"""


@pytest.mark.parametrize("depth, reported", [(6, False), (24, True)])
def test_the_depth_the_trainer_passes_beats_a_dataclass_default(tmp_path: Path, depth: int, reported: bool) -> None:
    write(tmp_path, {"model.py": LLAMA, "train.py": f"""\
import torch

from model import ModelArgs, Transformer

model = Transformer(ModelArgs(n_layers={depth})).cuda()
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""})
    found = findings(tmp_path, "--select", "GPU301")
    assert (("model.py", 24, "GPU301") in found) is reported


def test_a_version_flag_imported_from_another_module_guards_its_branch(tmp_path: Path) -> None:
    write(tmp_path, {"compat.py": "import torch\n\nTORCH_2_3 = tuple(map(int, torch.__version__.split('.')[:2])) "
                                  ">= (2, 3)\n",
                     "train.py": """\
import torch

from compat import TORCH_2_3

if TORCH_2_3:
    scaler = torch.amp.GradScaler("cuda")
else:
    scaler = torch.cuda.amp.GradScaler()
legacy = torch.cuda.amp.GradScaler()
"""})
    assert findings(tmp_path, "--select", "GPU003") == [("train.py", 9, "GPU003")]


DATA = """\
from PIL import Image
from torch.utils.data import Dataset


def make_dataset(files):
    class Frames(Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, index):
            return self.transform(Image.open(files[index]))

    return Frames()
"""


def test_a_dataset_factory_in_another_module_is_read(tmp_path: Path) -> None:
    write(tmp_path, {"data.py": DATA, "train.py": """\
import torch
from torch.utils.data import DataLoader

from data import make_dataset

loader = DataLoader(make_dataset(paths), batch_size=16)
for images in loader:
    images = images.cuda()
"""})
    assert findings(tmp_path, "--select", "GPU101,GPU102") == [("train.py", 6, "GPU101"), ("train.py", 6, "GPU102")]


def test_the_device_a_caller_picks_is_evidence_for_a_loader_module(tmp_path: Path) -> None:
    """data.py builds and iterates the loader; main.py (which imports it) puts the batches on CUDA. (The copies
    ask for non_blocking: a blocking copy of a loader the fix cannot follow leaves `pays-off` undecided.)"""
    write(tmp_path, {"data.py": """\
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder


def batches(root, device):
    for images, labels in DataLoader(ImageFolder(root), batch_size=64):
        yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
""", "main.py": """\
import torch

from data import batches

for x, y in batches("train", torch.device("cuda")):
    pass
""", "mps.py": """\
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

for images, labels in DataLoader(ImageFolder("train"), batch_size=64):
    images = images.to("mps")
"""})
    assert findings(tmp_path, "--select", "GPU101") == [("data.py", 6, "GPU101")]


def test_pedantic_reports_the_undecided_and_names_the_premise(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=64)
"""})
    assert findings(tmp_path, "--select", "GPU101") == []
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.gpulint]\nstrictness = \"pedantic\"\n",
                                             encoding="utf-8")
    from click.testing import CliRunner

    from gpulint.cli import main

    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "full", "--select", "GPU101",
                                       str(tmp_path)])
    assert "GPU101" in result.output
    assert "pedantic: not shown here: cpu-tensors, reaches-cuda, pays-off" in result.output  # the note says which
