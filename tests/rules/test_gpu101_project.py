"""GPU101 across files: a loader in a script or notebook that trains nothing feeds no training."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.test_project import findings, write
from tests.rules.test_gpu105_project import notebook

EMBED = """\
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
dataset = datasets.ImageFolder("data/lfw_cropped", transform=transforms.ToTensor())
embed_loader = DataLoader(dataset, batch_size=32, num_workers=8)
model = torch.load("resnet.pt").to(device).eval()
embeddings = []
with torch.no_grad():
    for xb, yb in embed_loader:
        embeddings.append(model(xb.to(device)).cpu())
"""

FINETUNE = """\
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
dataset = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
train_loader = DataLoader(dataset, batch_size=32, num_workers=8, shuffle=True)
model = torch.load("resnet.pt").to(device)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(8):
    for xb, yb in train_loader:
        loss = torch.nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_an_evaluation_notebook_no_file_imports_feeds_no_training(tmp_path: Path) -> None:
    """blind8 (facenet-pytorch): lfw_evaluate.ipynb computes embeddings of LFW under no_grad and trains nothing;
    finetune.ipynb's loader feeds a training loop."""
    write(tmp_path, {"examples/lfw_evaluate.ipynb": notebook(EMBED), "examples/finetune.ipynb": notebook(FINETUNE)})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU101")] == ["examples/finetune.ipynb"]


def test_an_evaluation_script_another_file_imports_stays_reported(tmp_path: Path) -> None:
    """The same code as a script: silent alone; once a project file imports it, it may be part of training."""
    write(tmp_path, {"embed.py": EMBED})
    assert findings(tmp_path, "--select", "GPU101") == []
    write(tmp_path, {"embed.py": EMBED, "run.py": "import embed\n"})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU101")] == ["embed.py"]
