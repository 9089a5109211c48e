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


EXTRACT = """\
import torch
from torch.utils.data import DataLoader
from data import AudioDataset


def main(root, out):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = AudioDataset(root)
    loader = DataLoader(dataset, batch_size=1, num_workers=4)
    encoder = torch.jit.load("encoder.pt").to(device)
    for name, wav in {use}:
        with torch.no_grad():
            feat = encoder(wav.to(device)).cpu()
        torch.save(feat, f"{{out}}/{{name[0]}}.pt")
        print(loader.batch_size, len(loader))


if __name__ == "__main__":
    main("data", "feats")
"""
AUDIO_DATA = """\
import torch
import torchaudio


class AudioDataset(torch.utils.data.Dataset):
    def __init__(self, root):
        self.paths = sorted(root)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.paths[i], torchaudio.load(self.paths[i])[0]
"""


def test_a_loader_a_function_of_an_inference_script_only_iterates_feeds_no_training(tmp_path: Path) -> None:
    """blind17 (yistLin/FragmentVC, 1 FP): preprocess.py's main() builds a loader and only iterates it, extracting
    wav2vec features under no_grad; the script trains nothing and no file imports it."""
    write(tmp_path, {"preprocess.py": EXTRACT.format(use="loader"), "data.py": AUDIO_DATA})
    assert findings(tmp_path, "--select", "GPU101") == []


def test_a_loader_a_function_of_an_inference_script_hands_on_stays_reported(tmp_path: Path) -> None:
    """Handed to another function, the same loader may reach code that trains: reported as before."""
    write(tmp_path, {"preprocess.py": EXTRACT.format(use="loader").replace(
        "from data import AudioDataset", "from data import AudioDataset, consume").replace(
        "print(loader.batch_size, len(loader))", "consume(loader)"),
        "data.py": AUDIO_DATA + "\n\ndef consume(loader):\n    yield from loader\n"})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU101")] == ["preprocess.py"]


SFT_DATA = """\
import torch
from torch.utils.data import Dataset


class SFTDataset(Dataset):
    def __init__(self, data, tokenizer, ignore_index=-100):
        self.data = data
        self.tokenizer = tokenizer
        self.ignore_index = ignore_index

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        example = self.data[idx]
        encoded_prompt = self.tokenizer.encode(example["instruction"])
        encoded = self.tokenizer.encode(example["instruction"] + example["output"], eos=True)
        labels = encoded.clone()
        labels[: len(encoded_prompt)] = self.ignore_index
        return {"input_ids": encoded.type(torch.int64), "labels": labels.type(torch.int64)}
"""
IMAGE_DATA = """\
import torch
from PIL import Image
from torch.utils.data import Dataset


class SFTDataset(Dataset):
    def __init__(self, data, tokenizer):
        self.data = data
        self.tokenizer = tokenizer

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        example = self.data[idx]
        image = torch.as_tensor(Image.open(example["path"]))
        return {"input_ids": self.tokenizer.encode(example["caption"]), "image": image}
"""
SFT_TRAIN = """\
import torch
from torch.utils.data import DataLoader

from data.base import SFTDataset


def train(model, data, tokenizer):
    loader = DataLoader(SFTDataset(data, tokenizer), batch_size=4, shuffle=True, num_workers=4)
    for batch in loader:
        input_ids = batch["input_ids"].to("cuda", non_blocking=True)
        model(input_ids).backward()
"""


def test_a_loader_of_token_ids_from_a_dataset_class_of_another_module_is_silent(tmp_path: Path) -> None:
    """blind18 (Lightning-AI/lit-gpt, 10 findings "true but worth nothing"): alpaca.py and its siblings load
    base.py's SFTDataset, whose items are token ids from `tokenizer.encode`: a few KB a batch, copied in
    microseconds pinned or not. The fact travels with the class to the file that imports it."""
    write(tmp_path, {"data/__init__.py": "", "data/base.py": SFT_DATA, "train.py": SFT_TRAIN})
    assert findings(tmp_path, "--select", "GPU101") == []


def test_a_loader_of_images_beside_token_ids_from_another_module_stays_reported(tmp_path: Path) -> None:
    """The same loader over items that also hold a decoded image: worth pinning, reported."""
    write(tmp_path, {"data/__init__.py": "", "data/base.py": IMAGE_DATA, "train.py": SFT_TRAIN})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU101")] == ["train.py"]
