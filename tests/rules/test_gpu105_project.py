"""GPU105 across files: a module class no training reaches runs its `forward` once per request, not per step."""

from __future__ import annotations

import json
from pathlib import Path

from tests.analysis.test_project import findings, write

MODEL = """\
import torch


class Matcher(torch.nn.Module):
    def forward(self, image, text):
        atts = torch.ones(image.shape[:-1]).to(image.device)
        return image * atts


def matcher():
    return Matcher()


class Captioner(torch.nn.Module):
    def forward(self, image):
        atts = torch.ones(image.shape[:-1]).to(image.device)
        return image * atts
"""

TRAIN = """\
import torch
from model import Captioner


def train(loader, optimizer):
    model = Captioner().cuda()
    for x in loader:
        loss = model(x.cuda()).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    train(loader, optimizer)
"""

PREDICT = """\
import torch
from model import matcher

model = matcher().cuda().eval()
with torch.no_grad():
    print(model(torch.rand(1, 4).cuda(), "a cat"))
"""


def test_a_class_only_a_predictor_uses_is_not_reported(tmp_path: Path) -> None:
    """BLIP: BLIP_ITM serves predict.py (one request, no training); BLIP_Decoder trains in train_caption.py."""
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN, "predict.py": PREDICT})
    assert findings(tmp_path, "--select", "GPU105") == [("model.py", 16, "GPU105")]


def test_a_class_used_in_a_way_not_read_stays_reported(tmp_path: Path) -> None:
    """The predictor imported by another module, or the model module imported whole: who builds the class
    is unknown, so its forward may run every step."""
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN, "predict.py": PREDICT, "serve.py": "import predict\n"})
    assert findings(tmp_path, "--select", "GPU105") == [("model.py", 6, "GPU105"), ("model.py", 16, "GPU105")]
    (tmp_path / "serve.py").unlink()
    (tmp_path / "other.py").write_text("import model\n", encoding="utf-8")
    assert findings(tmp_path, "--select", "GPU105") == [("model.py", 6, "GPU105"), ("model.py", 16, "GPU105")]


def test_a_file_alone_keeps_its_forward_reported(tmp_path: Path) -> None:
    write(tmp_path, {"model.py": MODEL + "\n\nmodel = Matcher().cuda()\n"})  # (the device shown in the file)
    assert findings(tmp_path, "--select", "GPU105") == [("model.py", 6, "GPU105"), ("model.py", 16, "GPU105")]


# -- a loop at the top level of a demo (StyleTTS2's inference notebooks: a few example sentences) ----

DEMO = """\
import torch

device = "cuda"
model = torch.jit.load("tts.pt").to(device)
texts = {"happy": "We are happy.", "sad": "We are sad."}
for name, text in texts.items():
    noise = torch.randn(1, 1, 256).to(device)
    wav = model(text, noise)
"""

TRAINING = DEMO + """\
    loss = wav.pow(2).mean()
    loss.backward()
"""


def notebook(code: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": code.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_demo_notebooks_loop_is_not_a_step(tmp_path: Path) -> None:
    write(tmp_path, {"demo.ipynb": notebook(DEMO), "train.ipynb": notebook(TRAINING)})
    found = findings(tmp_path, "--select", "GPU105")
    assert [name for name, _, _ in found] == ["train.ipynb"]


def test_a_demo_script_no_file_imports_is_not_a_step_but_an_imported_one_is(tmp_path: Path) -> None:
    write(tmp_path, {"demo.py": DEMO, "train.py": TRAINING})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU105")] == ["train.py"]
    other = tmp_path / "other"
    write(other, {"demo.py": DEMO, "run.py": "import demo\n"})
    assert [name for name, _, _ in findings(other, "--select", "GPU105")] == ["demo.py"]


# -- the `__main__` self-test of a model module other files import (sd-scripts' U-Net and ControlNet files,
# blind19: a ten-step loop on random stand-in inputs that checks memory and time by hand) ----------------

BACKBONE = """\
import time

import torch


class Backbone(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x, t):
        return self.proj(x) * t[:, None, None, None]


if __name__ == "__main__":
    net = Backbone().cuda().train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    started = time.perf_counter()
    for step in range(10):
        x = torch.randn(2, 4, 64, 64).cuda()
        t = torch.randint(0, 1000, (2,)).cuda()
        loss = net(x, t.float()).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    print(time.perf_counter() - started, torch.cuda.max_memory_allocated())
"""

FIT = """\
import torch
from backbone import Backbone


def fit(loader, device="cuda"):
    net = Backbone().to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    for x in loader:
        t = torch.randint(0, 1000, (x.shape[0],)).to(device)
        loss = net(x.to(device), t.float()).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    fit([])
"""


def test_the_main_block_of_an_imported_model_module_is_its_self_test(tmp_path: Path) -> None:
    """The training script's own per-step draw stays reported; the model module's benchmark loop does not."""
    write(tmp_path, {"backbone.py": BACKBONE, "fit.py": FIT})
    assert findings(tmp_path, "--select", "GPU105") == [("fit.py", 9, "GPU105")]


def test_the_main_block_of_a_script_no_file_imports_is_its_training(tmp_path: Path) -> None:
    """The same file run as the project's own training script (nothing imports it): its loop is the training."""
    write(tmp_path, {"backbone.py": BACKBONE})
    assert findings(tmp_path, "--select", "GPU105") == [("backbone.py", 20, "GPU105"), ("backbone.py", 21, "GPU105")]


# -- a generation script's pipeline class (sd-scripts' gen_img.py, blind19: the starting latents of each image,
# drawn on the CPU in `__call__`) --------------------------------------------------------------------------

GENERATE = """\
import torch


class Sampler:
    def __init__(self, unet, device):
        self.unet = unet
        self.device = device

    @torch.no_grad()
    def __call__(self, prompts, steps=30, generator=None):
        latents = torch.randn(len(prompts), 4, 64, 64, generator=generator).to(self.device)
        for t in range(steps):
            latents = latents - self.unet(latents, t)
        return latents


def main():
    unet = torch.jit.load("unet.pt").cuda().eval()
    sampler = Sampler(unet, torch.device("cuda"))
    for prompt in ["a cat", "a dog"]:
        print(sampler([prompt]).shape)


if __name__ == "__main__":
    main()
"""

TUNE = GENERATE.replace("""        print(sampler([prompt]).shape)
""", """        loss = sampler([prompt]).pow(2).mean()
        loss.backward()
""")


def test_a_class_of_a_generation_script_runs_per_request(tmp_path: Path) -> None:
    write(tmp_path, {"generate.py": GENERATE})
    assert findings(tmp_path, "--select", "GPU105") == []


GRAD_ELSEWHERE = GENERATE.replace("    @torch.no_grad()\n", "").replace("""    main()
""", """    with torch.no_grad():
        main()
""")


def test_a_class_of_a_script_that_trains_or_that_a_file_imports_stays_reported(tmp_path: Path) -> None:
    """Also when the method itself keeps autograd on (the file's no_grad is elsewhere: MeZO's run.py, blind17,
    whose `Framework.forward` runs beside a fine-tuning the file hands to a project Trainer)."""
    write(tmp_path, {"tune.py": TUNE})
    assert findings(tmp_path, "--select", "GPU105") == [("tune.py", 11, "GPU105")]
    (tmp_path / "tune.py").unlink()
    write(tmp_path, {"generate.py": GRAD_ELSEWHERE})
    assert findings(tmp_path, "--select", "GPU105") == [("generate.py", 10, "GPU105")]
    other = tmp_path / "other"
    write(other, {"generate.py": GENERATE, "serve.py": "from generate import Sampler\n"})
    assert findings(other, "--select", "GPU105") == [("generate.py", 11, "GPU105")]
