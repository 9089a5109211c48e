"""GPU evidence and explicitly CPU-only files."""

from __future__ import annotations

import pytest

from gpulint.analysis.device import GPU_EVIDENCE_TEXT, DeviceFacts, device_facts
from gpulint.project.facts import facts_of_text
from gpulint.project.view import ProjectView


def facts(source: str) -> DeviceFacts:
    found = facts_of_text(source)
    assert found is not None
    if found.gpu:
        assert GPU_EVIDENCE_TEXT.search(source), "the text prefilter would hide this evidence"
    return device_facts(ProjectView.alone(found))


@pytest.mark.parametrize(
    "source",
    [
        "model.cuda()\n",
        "import torch\ndevice = torch.device('cuda:0')\n",
        "x = x.to('cuda')\n",
        "import torch\nok = torch.cuda.is_available()\n",
        "import torch as th\nth.cuda.set_device(0)\n",
        "import torch\nd = torch.accelerator.current_accelerator()\n",
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        "model = DDP(model, device_ids=[rank])\n",
        "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
        "import torch\ndevice = torch.device(0)\n",
        "model = model.to(0)\n",
        "x = make(device=0)\n",
        "device = 'cuda:0'\n",
    ],
)
def test_gpu_evidence(source: str) -> None:
    result = facts(source)
    assert result.gpu_evidence
    assert not result.cpu_only


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndevice = torch.device('cpu')\n",
        "device = 'cpu'\nmodel.to(device)\n",
        "x = x.to('cpu')\n",
        "t = torch.zeros(3, device='cpu')\n",
    ],
)
def test_cpu_only(source: str) -> None:
    assert facts(source).cpu_only


@pytest.mark.parametrize(
    "source",
    [
        "state = torch.load(path, map_location='cpu')\n",  # loading to CPU says nothing about training
        "name = 'cpu'\n",
        "loader = make_loader()\n",
    ],
)
def test_neither(source: str) -> None:
    result = facts(source)
    assert not result.gpu_evidence and not result.cpu_only


def test_a_users_own_cuda_module_is_not_evidence() -> None:
    assert not facts("from mylib import cuda\nok = cuda.is_available()\n").gpu_evidence


def test_a_callers_evidence_counts() -> None:
    found = facts_of_text("def train(model, loader):\n    pass\n")
    assert found is not None
    alone = device_facts(ProjectView.alone(found))
    called = device_facts(ProjectView(own=found, gpu_callers=True))
    assert not alone.gpu_evidence and called.gpu_evidence
