"""A "cpu" that only says where torch.load maps a checkpoint's tensors (project/checkpoint_loads.py)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from gpulint.project.checkpoint_loads import checkpoint_cpus
from gpulint.project.facts import ImportAliases, module_imports


def _mapped(source: str) -> list[int]:
    """The rows of the "cpu" strings left out."""
    tree = ast.parse(textwrap.dedent(source))
    left_out = checkpoint_cpus(tree, ImportAliases(module_imports(tree)).qualified)
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) in left_out)


@pytest.mark.parametrize("source", [
    'import torch\nmodel.load_state_dict(torch.load(path, map_location="cpu"))\n',
    'import torch\nmodel.load_state_dict(torch.load(path, "cpu"))\n',  # torch.load's second argument
    'import torch\nsd = torch.load(path, map_location=torch.device("cpu"))\nmodel.load_state_dict(sd)\n',
    'import torch\nsd = torch.load(path, map_location="cpu:0")["state_dict"]\nmodel.load_state_dict(sd)\n',
    # jepa's load_checkpoint: entries loaded, read, formatted, returned; the checkpoint tested and deleted
    '''\
    import torch
    def load_checkpoint(path, encoder, opt):
        try:
            checkpoint = torch.load(path, map_location=torch.device("cpu"))
            epoch = checkpoint["epoch"]
            pretrained = checkpoint.get("encoder")
            pretrained = {k.replace("module.", ""): v for k, v in pretrained.items()}
            for k, v in encoder.state_dict().items():
                if k in pretrained and pretrained[k].shape != v.shape:
                    pretrained[k] = v
            encoder.load_state_dict(pretrained)
            if "opt" in checkpoint and checkpoint is not None:
                opt.load_state_dict(checkpoint["opt"])
            print(list(checkpoint.keys()), f"{checkpoint['epoch']}")
            del checkpoint
        except Exception:
            epoch = 0
        return encoder, opt, epoch
    ''',
    # a whole model loaded, but visibly moved to CUDA
    'import torch\nmodel = torch.load(path, map_location="cpu").cuda()\n',
    'import torch\nmodel = torch.load(path, map_location="cpu")\nmodel.to("cuda:0")\nopt = f(model.parameters())\n',
    'import torch\nckpt = torch.load(path, map_location="cpu")\nself.start_epoch = ckpt["epoch"] + 1\n',
])
def test_left_out(source: str) -> None:
    assert _mapped(source)


@pytest.mark.parametrize("source", [
    # a whole model loaded onto the CPU: trained there unless moved
    'import torch\nmodel = torch.load(path, map_location="cpu")\nopt = Adam(model.parameters())\n',
    'import torch\nmodel = torch.load(path, map_location="cpu")\nmodel.to(device)\n',
    'import torch\nmodel = torch.load(path, map_location="cpu")\ntrain(model)\n',
    'import torch\ndef load(path):\n    return torch.load(path, map_location="cpu")\n',
    'import torch\nself.model = torch.load(path, map_location="cpu")\n',
    # a model kept in a checkpoint's entry, used as a module
    'import torch\nmodel = torch.load(path, map_location="cpu")["model"].float()\n',
    'import torch\nckpt = torch.load(path, map_location="cpu")\nnet = ckpt["ema"]\nnet.train()\n',
    'import torch\nckpt = torch.load(path, map_location="cpu")\ny = ckpt["model"](x)\n',
    'import torch\nckpt = torch.load(path, map_location="cpu")\nopt = torch.optim.SGD(ckpt["params"], lr=0.1)\n',
    'import torch\nckpt = torch.load(path, map_location="cpu")\nself.net = ckpt["net"]\nself.net.eval()\n',
    # not torch.load's map_location
    'import torch\nx = torch.zeros(3, device="cpu")\n',
    'import torch\nmodel.load_state_dict(torch.load(path, map_location=lambda s, loc: s))\nd = "cpu"\n',
    'import torch\ndevice = "cpu"\nmodel.load_state_dict(torch.load(path, map_location=device))\n',
])
def test_kept(source: str) -> None:
    assert _mapped(source) == []
