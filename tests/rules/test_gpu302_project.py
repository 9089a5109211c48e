"""GPU302 across files: a `gradient_checkpointing_enable()` of a class the project defines is not Hugging Face's."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gpulint.cli import main
from tests.analysis.test_project import findings, write

REWRITE = """\
import torch.nn as nn


class LLaMAModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def gradient_checkpointing_enable(self):
        self.config.gradient_checkpointing = True


def create_model(config):
    return LLaMAModel(config)
"""

FINETUNE = """\
import torch
import transformers

import llama_compress

model = llama_compress.create_model(config)
model.gradient_checkpointing_enable()
model.add_adapter(adapter_config)
"""

BOTH = """\
import torch
import transformers

import llama_compress

teacher = transformers.AutoModelForCausalLM.from_pretrained("gpt2").cuda()
teacher.gradient_checkpointing_enable()
student = llama_compress.create_model(config)
student.gradient_checkpointing_enable()
teacher.add_adapter(adapter_config)
student.add_adapter(adapter_config)
"""


def test_the_projects_own_method_is_not_hugging_faces(tmp_path: Path) -> None:
    """blind18 (minimal-llama): pref/finetune.py builds llama_compress's LLaMAModel, whose method takes no
    arguments; the fix's gradient_checkpointing_kwargs would raise TypeError."""
    write(tmp_path, {"llama_compress.py": REWRITE, "finetune.py": FINETUNE})
    assert findings(tmp_path, "--select", "GPU302") == []


def test_a_from_pretrained_model_beside_it_stays_reported(tmp_path: Path) -> None:
    """A model from_pretrained builds is Hugging Face's, whatever the imported module defines; alone, the call
    with no project class around is reported too."""
    write(tmp_path, {"llama_compress.py": REWRITE, "finetune.py": BOTH})
    assert [(name, row) for name, row, _ in findings(tmp_path, "--select", "GPU302")] == [("finetune.py", 7)]
    write(tmp_path, {"llama_compress.py": "def create_model(config):\n    return None\n", "finetune.py": FINETUNE})
    assert [name for name, _, _ in findings(tmp_path, "--select", "GPU302")] == ["finetune.py"]


BLOCK = """\
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, width, use_checkpoint=True):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.use_checkpoint = use_checkpoint

    def inner(self, h):
        return h + self.proj(h).relu()

    def forward(self, h):
        if self.training:
            if self.use_checkpoint:
                h.requires_grad_(True)
                h = checkpoint(self.inner, h)
            else:
                h = self.inner(h)
        return h
"""


def test_inputs_made_to_require_grad_on_a_torch_that_does_not_warn_are_not_reported(tmp_path: Path) -> None:
    """blind21 (OpenChatKit): `pytorch=2.0.1` in environment.yml admits no torch that warns about a missing
    use_reentrant, and the block's input requires grad, so the reentrant mode loses nothing: the fix changes
    nothing a run shows. A range ending before 2.1 is read the same way."""
    write(tmp_path, {"environment.yml": "dependencies:\n  - python=3.10\n  - pytorch=2.0.1\n", "blocks.py": BLOCK})
    assert findings(tmp_path, "--select", "GPU302") == []
    write(tmp_path, {"environment.yml": "dependencies:\n  - pip:\n      - torch>=1.12,<2.1\n", "blocks.py": BLOCK})
    assert findings(tmp_path, "--select", "GPU302") == []


def test_a_torch_that_warns_or_an_input_needing_no_grad_stays_reported(tmp_path: Path) -> None:
    """Either condition alone leaves the finding: a range reaching 2.1 (torch warns), a configured torch-version
    (a floor only: newer torch may run the code), no pin at all, or a block input nothing makes require grad on
    the 2.0 pin (the trap can drop its gradients)."""
    for environment in ("dependencies:\n  - pytorch>=2.0,<2.2\n", "dependencies:\n  - numpy\n"):
        write(tmp_path, {"environment.yml": environment, "blocks.py": BLOCK})
        assert findings(tmp_path, "--select", "GPU302") == [("blocks.py", 18, "GPU302")]
    configured = tmp_path / "configured"
    write(configured, {"blocks.py": BLOCK})
    (configured / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.gpulint]\ntorch-version = '2.0'\n",
                                               encoding="utf-8")
    assert findings(configured, "--select", "GPU302") == [("blocks.py", 18, "GPU302")]
    pinned = tmp_path / "pinned"
    write(pinned, {"environment.yml": "dependencies:\n  - pytorch=2.0.1\n",
                   "blocks.py": BLOCK.replace("                h.requires_grad_(True)\n", "")})
    assert findings(pinned, "--select", "GPU302") == [("blocks.py", 17, "GPU302")]


GETTERS = """\
import importlib

import torch.utils.checkpoint

if importlib.util.find_spec("deepspeed") is not None:
    import deepspeed


def get_checkpoint_fn():
    if deepspeed.checkpointing.is_configured():
        checkpoint = deepspeed.checkpointing.checkpoint
    else:
        checkpoint = torch.utils.checkpoint.checkpoint
    return checkpoint


def torch_checkpoint():
    return torch.utils.checkpoint.checkpoint


def chosen_checkpoint(use_torch):
    return torch.utils.checkpoint.checkpoint if use_torch else deepspeed.checkpointing.checkpoint
"""

STACK = """\
import torch.nn as nn

from ckpt_utils import chosen_checkpoint, get_checkpoint_fn
from ckpt_utils import torch_checkpoint as plain


class Stack(nn.Module):
    def forward(self, blocks, x):
        checkpoint_fn = get_checkpoint_fn()
        step = plain()
        other = chosen_checkpoint(True)
        for block in blocks:
            x = checkpoint_fn(block, x)
            x = step(block, x)
            x = other(block, x)
        return x
"""


def test_calls_of_what_an_imported_function_returns(tmp_path: Path) -> None:
    """A function that returns only torch's checkpoint: a call of what it returns, imported, is reported and
    gets the keyword at the call (the file names no torch checkpoint itself: the project facts let it through
    the prefilter). blind23 (openfold): utils/checkpointing.py's get_checkpoint_fn returns torch's checkpoint
    unless DeepSpeed's is configured, and one may return torch's only where a test holds: which one runs is
    configuration the linter does not see, and DeepSpeed's takes no use_reentrant, so their calls are not
    reported (of the 6 such calls in openfold, 4 were read as blocks built with ckpt=False or reached by no
    path taken)."""
    write(tmp_path, {"ckpt_utils.py": GETTERS, "stack.py": STACK})
    assert findings(tmp_path, "--select", "GPU302") == [("stack.py", 14, "GPU302")]
    result = CliRunner().invoke(main, ["check", "--no-cache", "--unsafe-fixes", "--diff", "--select", "GPU302",
                                       str(tmp_path)])
    assert "+            x = step(block, x, use_reentrant=False)" in result.output
    assert "checkpoint_fn(block, x, use_reentrant" not in result.output
