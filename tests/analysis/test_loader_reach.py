"""GPU101 follows a loader across function and module boundaries (issue 21, fourth blind reading: 0 of 4).

pytorch-cifar100 builds its loaders in `utils.get_training_dataloader()` and copies their batches with
`.cuda()` in `train.py`; OpenAI-CLIP copies its batches with `v.to(CFG.device)`, the device of the
`config.py` it imports. The finding stays at the DataLoader call (where `pin_memory=True` goes), and only
when the consuming module is found and copies the batches to a CUDA device: unknown stays silent."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpulint.cli import main
from gpulint.project.facts import facts_of_text
from gpulint.project.loader_flow import cuda_devices, moved_results

MESSAGE = "DataLoader without pin_memory=True: its batches' copies to the GPU cannot run asynchronously"

UTILS = """\
import torchvision
from torch.utils.data import DataLoader


def get_training_dataloader(batch_size=16, num_workers=2):
    training = torchvision.datasets.CIFAR100(root="./data", train=True, download=True)
    loader = DataLoader(training, shuffle=True, num_workers=num_workers, batch_size=batch_size)
    return loader


def get_loaders(batch_size=16):
    train = DataLoader(torchvision.datasets.CIFAR10("./data", train=True), batch_size=batch_size, num_workers=2)
    test = DataLoader(torchvision.datasets.CIFAR10("./data", train=False), batch_size=batch_size, num_workers=2)
    return train, test


def get_dict(batch_size=16):
    train = DataLoader(torchvision.datasets.CIFAR10("./data", train=True), batch_size=batch_size, num_workers=2)
    return {"train": train}
"""

TRAIN = """\
import torch
from utils import get_training_dataloader, get_loaders, get_dict


def train(epoch):
    for batch_index, (images, labels) in enumerate(cifar100_training_loader):
        labels = labels.cuda()
        images = images.cuda()


def step(model, batch):
    x, y = batch
    return model(x.to(device, non_blocking=True))


if __name__ == "__main__":
    device = torch.device("cuda")
    cifar100_training_loader = get_training_dataloader(num_workers=4)
    tr, te = get_loaders()
    for b in tr:
        step(None, b)
    for x in get_dict()["train"]:
        x.to(device)
    train(1)
"""


def write(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def findings(root: Path, *args: str) -> list[tuple[str, int, str, str, str]]:
    """(file, row, message, fix message, note) of each GPU101 finding."""
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--no-cache", "--select", "GPU101",
                                       *args, str(root)])
    assert result.exit_code in (0, 1), result.output
    return sorted((Path(f["filename"]).relative_to(root).as_posix(), f["location"]["row"], f["message"],
                   (f.get("fix") or {}).get("message") or "", f.get("note") or "")
                  for f in json.loads(result.stdout))


def test_loaders_returned_to_the_module_that_copies_their_batches(tmp_path: Path) -> None:
    """The whole result, a tuple element, a dict key; the copy in the loop or in the step function the batch is
    handed to. The test loader (`te`) is never iterated: silent."""
    write(tmp_path, {"utils.py": UTILS, "train.py": TRAIN})
    note = ("its batches are copied to the GPU in train.py: pass non_blocking=True to the .to(device) / .cuda() "
            "calls there")
    assert findings(tmp_path) == [
        ("utils.py", 7, MESSAGE, "Add `pin_memory=True`", note),
        ("utils.py", 12, MESSAGE, "Add `pin_memory=True`", ""),  # step() already copies asynchronously
        ("utils.py", 18, MESSAGE, "Add `pin_memory=True`", note),
    ]
    result = CliRunner().invoke(main, ["fix", "--no-cache", "--select", "GPU101", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    fixed = (tmp_path / "utils.py").read_text(encoding="utf-8")
    assert fixed.count("pin_memory=True") == 3
    assert "train=False), batch_size=batch_size, num_workers=2)" in fixed  # the test loader is left alone
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN  # the fix touches only the loader's file


@pytest.mark.parametrize("importing, spelled", [
    ("import utils", "utils.get_training_dataloader"),
    ("import utils as u", "u.get_training_dataloader"),
    ("from utils import get_training_dataloader as get", "get"),
    ("from data import utils", "utils.get_training_dataloader"),
    ("import data.utils", "data.utils.get_training_dataloader"),
])
def test_every_spelling_of_the_import(tmp_path: Path, importing: str, spelled: str) -> None:
    folder = "data/" if importing.startswith(("from data ", "import data.")) else ""
    files = {f"{folder}utils.py": UTILS, "train.py": f"""\
import torch
{importing}

loader = {spelled}()
for x, y in loader:
    x = x.cuda()
"""}
    if folder:
        files["data/__init__.py"] = ""
    write(tmp_path, files)
    assert [(name, row) for name, row, *_ in findings(tmp_path)] == [(f"{folder}utils.py", 7)]


@pytest.mark.parametrize("consumer", [
    # the batches are never copied, or copied to the CPU / MPS, or the result is not iterated here
    "loader = get_training_dataloader()\nfor x, y in loader:\n    print(x.shape)\n",
    "loader = get_training_dataloader()\nfor x, y in loader:\n    x = x.to('cpu')\n",
    "device = torch.device('mps')\nloader = get_training_dataloader()\nfor x, y in loader:\n    x = x.to(device)\n",
    "loader = get_training_dataloader()\nrun(loader)\n",
    # a named device nothing shows to be CUDA
    "loader = get_training_dataloader()\nfor x, y in loader:\n    x = x.to(args.device)\n",
    # the name is rebound: which loader the loop iterates is not known
    "loader = get_training_dataloader()\nloader = make()\nfor x, y in loader:\n    x = x.cuda()\n",
    # the module defines its own function of that name
    "def get_training_dataloader():\n    return []\n\nfor x, y in get_training_dataloader():\n    x = x.cuda()\n",
])
def test_unknown_or_refuted_consumers_stay_silent(tmp_path: Path, consumer: str) -> None:
    write(tmp_path, {"utils.py": UTILS, "train.py": "import torch\nfrom utils import get_training_dataloader\n\n"
                     + consumer})
    assert findings(tmp_path) == []


def test_a_dataset_on_the_gpu_stays_silent_across_modules(tmp_path: Path) -> None:
    write(tmp_path, {"data.py": """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def get_loader(x):
    return DataLoader(TensorDataset(x.cuda()), batch_size=8)
""", "train.py": "import torch\nfrom data import get_loader\n\nfor (x,) in get_loader(t):\n    x = x.cuda()\n"})
    assert findings(tmp_path) == []


CONFIG = """\
import torch

batch_size = 32
num_workers = 0
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""

CLIP_DATASET = """\
import cv2
import torch


class CLIPDataset(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files

    def __getitem__(self, idx):
        return {"image": torch.tensor(cv2.imread(self.files[idx])).permute(2, 0, 1).float()}

    def __len__(self):
        return len(self.files)
"""

# OpenAI-CLIP's main.py, its copy given non_blocking (the real one is blocking, in a dict comprehension the fix
# does not reach, which leaves GPU101's `pays-off` undecided): what is tested here is the device evidence
CLIP_MAIN = """\
import torch
from tqdm import tqdm

import config as CFG
from dataset import CLIPDataset


def build_loaders(files, mode):
    dataset = CLIPDataset(files)
    dataloader = torch.utils.data.DataLoader(
        dataset,
        batch_size=CFG.batch_size,
        num_workers=CFG.num_workers,
        shuffle=True if mode == "train" else False,
    )
    return dataloader


def train_epoch(model, train_loader, optimizer):
    tqdm_object = tqdm(train_loader, total=len(train_loader))
    for batch in tqdm_object:
        batch = {k: v.to(CFG.device, non_blocking=True) for k, v in batch.items() if k != "caption"}
        loss = model(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    train_loader = build_loaders(["a.jpg"], mode="train")
    optimizer = torch.optim.AdamW(model.parameters())
    train_epoch(model, train_loader, optimizer)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("config, reported", [
    (CONFIG, True),
    (CONFIG.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"mps"'), False),
    (CONFIG.replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")', '"cpu"'), False),
])
def test_the_device_of_an_imported_config_module(tmp_path: Path, config: str, reported: bool) -> None:
    """OpenAI-CLIP: main.py copies with `v.to(CFG.device)`; config.py binds `device` to CUDA when available."""
    write(tmp_path, {"config.py": config, "dataset.py": CLIP_DATASET, "main.py": CLIP_MAIN})
    note = ("gpulint sees no copy of its batches to the GPU in this file: pass non_blocking=True to the "
            ".to(device) / .cuda() calls that make them")
    assert findings(tmp_path) == ([("main.py", 10, MESSAGE, "Add `pin_memory=True`", note)] if reported else [])


def test_the_device_of_a_config_class_imported_by_name(tmp_path: Path) -> None:
    config = ("import torch\n\n\nclass CFG:\n    num_workers = 0\n"
              "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n")
    write(tmp_path, {"config.py": config, "dataset.py": CLIP_DATASET,
                     "main.py": CLIP_MAIN.replace("import config as CFG", "from config import CFG")})
    assert [(name, row) for name, row, *_ in findings(tmp_path)] == [("main.py", 10)]


def test_moved_results_facts() -> None:
    tree = ast.parse(TRAIN)
    assert moved_results(tree, {"torch", "get_training_dataloader", "get_loaders", "get_dict"}) == {
        "get_dict['train']": ("at:device", "moved"),
        "get_loaders[0]": ("at:device", "moved", "non-blocking"),
        "get_training_dataloader": ("cuda", "moved"),
    }
    facts = facts_of_text(TRAIN)
    assert facts is not None and facts.moved_results == moved_results(tree, {
        "torch", "get_training_dataloader", "get_loaders", "get_dict"})


def test_cuda_devices_facts() -> None:
    assert cuda_devices(ast.parse(CONFIG)) == ("device",)
    assert cuda_devices(ast.parse("device = 'cuda'\ndevice = 'cpu'\n")) == ()  # bound twice: not known
    assert cuda_devices(ast.parse("import torch\ndevice = torch.device('mps' if x else 'cuda')\n")) == ()
    assert cuda_devices(ast.parse("class CFG:\n    device = 'cuda:0'\n")) == ("CFG.device",)


@pytest.mark.parametrize("config, reported", [
    (CONFIG, True),
    (CONFIG.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"mps"'), False),
    (CONFIG.replace("device = ", "other = "), False),
])
def test_gpu001_counts_the_device_of_an_imported_config_module(tmp_path: Path, config: str, reported: bool) -> None:
    """OpenAI-CLIP main.py:55 (fourth blind reading, missed): its fp32 step copies to `CFG.device`."""
    write(tmp_path, {"config.py": config, "dataset.py": CLIP_DATASET, "main.py": CLIP_MAIN})
    result = CliRunner().invoke(main, ["check", "--output-format", "json", "--no-cache", "--select", "GPU001",
                                       str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    found = [(Path(f["filename"]).name, f["location"]["row"], f["message"]) for f in json.loads(result.stdout)]
    assert found == ([("main.py", 25, "forward pass and loss run in fp32: wrap them in torch.autocast (up to 3x "
                                      "faster on tensor-core GPUs)")] if reported else [])


def test_imported_device_targets_facts() -> None:
    facts = facts_of_text(CLIP_MAIN)
    assert facts is not None and facts.imported_device_targets == ("CFG.device",)
    local = facts_of_text("import torch\ndevice = get()\nx.to(device)\nx.to(args.device)\n")
    assert local is not None and local.imported_device_targets == ()  # not an imported module's name


# fifth blind reading (Diffusion-Models-pytorch): the training script star-imports the module that builds the
# loader (`from pictures import *`), and copies its batches in a loop over what `make_loader()` returns
PICTURES = """\
import torchvision
from torch.utils.data import DataLoader


def make_loader(opts):
    pictures = torchvision.datasets.ImageFolder(opts.root)
    batches = DataLoader(pictures, batch_size=opts.batch, shuffle=True)
    return batches
"""

FIT = """\
import argparse

import torch
from tqdm import tqdm
from pictures import *


def fit(opts):
    device = opts.device
    batches = make_loader(opts)
    bar = tqdm(batches)
    for step, (pics, _) in enumerate(bar):
        pics = pics.to(device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    opts = parser.parse_args()
    opts.batch = 8
    opts.device = "cuda"
    fit(opts)
"""


def test_a_star_import_and_a_device_attribute_set_to_cuda(tmp_path: Path) -> None:
    write(tmp_path, {"pictures.py": PICTURES, "fit.py": FIT})
    note = ("its batches are copied to the GPU in fit.py: pass non_blocking=True to the .to(device) / .cuda() "
            "calls there")
    assert findings(tmp_path) == [("pictures.py", 7, MESSAGE, "Add `pin_memory=True`", note)]


@pytest.mark.parametrize("old, new", [
    # nothing shows CUDA: the only device named is the CPU
    ('opts.device = "cuda"', 'opts.device = "cpu"'),
    # the script binds the name itself (an import by name, an assignment), or star-imports another module
    ("from pictures import *", "from pictures import *\nfrom loaders import make_loader"),
    ("    batches = make_loader(opts)\n", "    make_loader = choose(opts)\n    batches = make_loader(opts)\n"),
    ("from pictures import *", "from helpers import *"),
])
def test_star_imports_and_device_attributes_stay_silent_when_unknown(tmp_path: Path, old: str, new: str) -> None:
    assert old in FIT
    write(tmp_path, {"pictures.py": PICTURES, "helpers.py": "def unrelated():\n    return 1\n",
                     "loaders.py": "def make_loader(opts):\n    return []\n", "fit.py": FIT.replace(old, new)})
    assert findings(tmp_path) == []


def test_moved_results_of_a_star_import() -> None:
    tree = ast.parse(FIT)
    imported = {"argparse", "torch", "tqdm"}
    tqdm = {"tqdm": ("at:device", "moved")}  # the result of the imported tqdm() is iterated too
    assert moved_results(tree, imported) == tqdm  # without the star import, make_loader is no import
    assert moved_results(tree, imported, star=True) == {"*make_loader": ("at:device", "moved"), **tqdm}
    facts = facts_of_text(FIT)
    assert facts is not None and facts.moved_results == {"*make_loader": ("at:device", "moved"), **tqdm}
    # a name the file binds (a def, an assignment in the function, a parameter) is no star import's
    for bound in (FIT.replace("def fit(opts):", "def make_loader(opts):\n    return []\n\n\ndef fit(opts):"),
                  FIT.replace("def fit(opts):", "def fit(opts):\n    make_loader = choose(opts)"),
                  FIT.replace("def fit(opts):", "def fit(opts, make_loader):")):
        assert moved_results(ast.parse(bound), imported, star=True) == tqdm


# twenty-third blind reading (transferlearning's finetune_AlexNet_ResNet): the script keeps the loaders under the
# keys of a dict (`loaders["tar"] = data.load_target(...)`, and a tuple of two keys for the split ones) and hands
# the dict to a function that iterates `loaders[phase]`; the split loaders' datasets are parts of a random_split
FOLDERS = """\
import torch
from torchvision import datasets


def load_target(root, batch_size):
    images = datasets.ImageFolder(root=root)
    loader = torch.utils.data.DataLoader(images, batch_size=batch_size, shuffle=True, num_workers=4)
    return loader


def load_source(root, batch_size):
    images = datasets.ImageFolder(root=root)
    train_part, val_part = torch.utils.data.random_split(images, [0.8, 0.2])
    train = torch.utils.data.DataLoader(train_part, batch_size=batch_size, shuffle=True, num_workers=4)
    val = torch.utils.data.DataLoader(val_part, batch_size=batch_size, num_workers=4)
    return train, val
"""

PHASES = """\
import torch
import folders

DEVICE = torch.device("cuda")


def evaluate(model, loader):
    for x, y in loader:
        x, y = x.to(DEVICE), y.to(DEVICE)


def fit(model, loaders, optimizer):
    for phase in ["src", "val"]:
        for x, y in loaders[phase]:
            x, y = x.to(DEVICE), y.to(DEVICE)
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    evaluate(model, loaders["tar"])


if __name__ == "__main__":
    loaders = {}
    loaders["tar"] = folders.load_target("t", 64)
    loaders["src"], loaders["val"] = folders.load_source("s", 64)
    fit(model, loaders, optimizer)
"""


def test_loaders_kept_under_the_keys_of_a_dict(tmp_path: Path) -> None:
    write(tmp_path, {"folders.py": FOLDERS, "phases.py": PHASES})
    note = ("its batches are copied to the GPU in phases.py: pass non_blocking=True to the .to(device) / .cuda() "
            "calls there")
    assert findings(tmp_path) == [("folders.py", row, MESSAGE, "Add `pin_memory=True`", note) for row in (7, 14, 15)]
    assert moved_results(ast.parse(PHASES), {"torch", "folders"}) == {
        "folders.load_source[0]": ("at:DEVICE", "moved"), "folders.load_source[1]": ("at:DEVICE", "moved"),
        "folders.load_target": ("at:DEVICE", "moved")}


@pytest.mark.parametrize("old, new", [
    # the dict is bound twice: which one the loops read is not known
    ("    fit(model, loaders, optimizer)", "    loaders = build()\n    fit(model, loaders, optimizer)"),
    # the only reads take other keys (`phase` takes "src" and "val", never "tar")
    ('    for phase in ["src", "val"]:\n        for x, y in loaders[phase]:',
     '    for phase in ["src", "val"]:\n        for x, y in loaders["other"]:'),
    ('    evaluate(model, loaders["tar"])', '    evaluate(model, loaders["x"])'),
])
def test_loaders_under_keys_no_loop_reads_stay_silent(tmp_path: Path, old: str, new: str) -> None:
    assert old in PHASES
    write(tmp_path, {"folders.py": FOLDERS, "phases.py": PHASES.replace(old, new)})
    rows = [row for _, row, *_ in findings(tmp_path)]
    assert rows == ([] if "build()" in new else [7] if '"other"' in new else [14, 15])
