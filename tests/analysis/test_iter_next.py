"""`.next()` on a DataLoader's iterator: code that runs only on torch 1.12 or older (project/iter_next.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpulint.project.facts import FileFacts, facts_of_text
from tests.analysis.test_project import findings, write

HEAD = "import torch\nfrom torch.utils.data import DataLoader\n\n"


def facts(text: str) -> FileFacts:
    found = facts_of_text(HEAD + textwrap.dedent(text))
    assert found is not None
    return found


@pytest.mark.parametrize("text", [
    "loader = DataLoader(data, batch_size=8)\nx, y = iter(loader).next()\n",
    "loader = torch.utils.data.DataLoader(data)\nit = iter(loader)\nx = it.next()\n",
    # a parameter every call hands a loader; a returned tuple's element; the loop's new iterator
    """\
    def make():
        train = DataLoader(data)
        return train, DataLoader(other)


    def epoch(loaders):
        src, tgt = loaders
        a, b = iter(src), iter(tgt)
        for i in range(10):
            x = a.next()
            y = b.next()
            b = iter(tgt)


    loaders = make()
    epoch(loaders)
    """,
    # a loader kept on `self`, its iterator too; a `.next()` in an except clause (a fallback that fails too)
    """\
    class Trainer:
        def __init__(self):
            self.loader = DataLoader(data)

        def run(self):
            self.it = iter(self.loader)
            try:
                x = self.it.next()
            except StopIteration:
                self.it = iter(self.loader)
                x = self.it.next()
    """,
])
def test_next_on_a_loaders_iterator_caps_torch_below_1_13(text: str) -> None:
    found = facts(text)
    assert found.iterator_next == (("DataLoader",),) and found.torch_ceiling == (1, 13)


@pytest.mark.parametrize("text", [
    "loader = DataLoader(data)\nit = iter(loader)\nx = next(it)\ny = it.__next__()\n",
    # a user's class with its own `next`, and a generator's iterator
    "class Stream:\n    def next(self):\n        return 1\n\n\ns = Stream()\nx = s.next()\n",
    "def gen():\n    yield 1\n\n\nit = iter(gen())\nx = it.next()\n",
    # iterators of something else, or of a name bound otherwise too
    "it = iter(batches)\nx = it.next()\n",
    "loader = DataLoader(data)\nif small:\n    loader = [1, 2]\nx = iter(loader).next()\n",
    "for loader in loaders:\n    x = iter(loader).next()\n",
    # a parameter whose callers are unknown (the function is handed on)
    "def epoch(loader):\n    return iter(loader).next()\n\n\nrun = epoch\nepoch(DataLoader(data))\n",
    # a fallback for another torch: a `try` that catches AttributeError, a version test
    "it = iter(DataLoader(data))\ntry:\n    x = it.next()\nexcept AttributeError:\n    x = next(it)\n",
    "it = iter(DataLoader(data))\nif torch.__version__ < '1.13':\n    x = it.next()\n",
    # `iter` is not the builtin
    "def iter(x):\n    return x\n\n\nx = iter(DataLoader(data)).next()\n",
])
def test_other_next_calls_are_no_evidence(text: str) -> None:
    found = facts(text)
    assert found.iterator_next == () and found.torch_ceiling is None


def test_loader_functions_and_imported_origins() -> None:
    producer = facts("def load(root):\n    data = make(root)\n    loader = DataLoader(data)\n    return loader\n\n\n"
                     "def pair():\n    return DataLoader(a), DataLoader(b)\n\n\ndef other():\n"
                     "    DataLoader(a)\n    return 1\n")
    assert producer.loader_functions == ("load", "pair[0]", "pair[1]")
    consumer = facts_of_text("import data_loader\n\nit = iter(data_loader.load('x'))\nx = it.next()\n")
    assert consumer is not None and consumer.iterator_next == (("call:data_loader.load",),)
    assert consumer.torch_ceiling is None  # the project view resolves the import


DATA_LOADER = """\
import torch
from torchvision import datasets


def load_training(root, batch_size):
    data = datasets.ImageFolder(root)
    return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=True)
"""
MAIN = """\
import torch
import data_loader


def train(model, source_loader, target_loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    target_iter = iter(target_loader)
    for x, y in source_loader:
        t, _ = target_iter.next()
        loss = model(x.cuda(), t.cuda()).mean()
        loss.backward()
        optimizer.step()


source = data_loader.load_training("a", 32)
target = data_loader.load_training("b", 32)
model = torch.nn.Linear(512, 512).cuda()
train(model, source, target)
"""


@pytest.mark.parametrize(("files", "reported"), [
    ({"data_loader.py": DATA_LOADER, "main.py": MAIN}, False),
    # `next(it)`: runs on any torch
    ({"data_loader.py": DATA_LOADER, "main.py": MAIN.replace("target_iter.next()", "next(target_iter)")}, True),
    # the imported function returns something else than a DataLoader
    ({"data_loader.py": DATA_LOADER.replace("torch.utils.data.DataLoader", "make_stream"), "main.py": MAIN}, True),
])
def test_next_on_an_imported_functions_loader_caps_the_script(
        tmp_path: Path, files: dict[str, str], reported: bool) -> None:
    """DeepMEDA's layout (blind23: jindongwang/transferlearning): data_loader.py builds the DataLoaders and
    main.py calls `.next()` on their iterators, removed in torch 1.13: no fused SGD (2.3) on the torch it needs."""
    write(tmp_path, files)
    assert (("main.py", 6, "GPU201") in findings(tmp_path, "--select", "GPU201")) is reported
