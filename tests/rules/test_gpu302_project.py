"""GPU302 across files: a `gradient_checkpointing_enable()` of a class the project defines is not Hugging Face's."""

from __future__ import annotations

from pathlib import Path

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
