"""Does this file target a GPU, or is it explicitly CPU-only?

GPU-only rules fire only where a GPU is plausible: a file with GPU evidence of its own, a file
imported by one that has it (the device is chosen in `main.py`, the step runs in `train.py`),
or (for the rules that say so) any file that does not pin itself to the CPU. The evidence is
read from the project facts (project/facts.py), not from the LibCST tree.
"""

from __future__ import annotations

import re

from gpulint.analysis.evidence import REFUTED, SHOWN, UNDECIDED, Evidence
from gpulint.project.view import ProjectView
from gpulint.records import dataclass

# Every kind of GPU evidence the facts scan accepts spells one of these in the file's text
# (a "cuda..."/"nccl" string, torch.cuda / torch.accelerator, `.cuda(`, `device_ids=`,
# "LOCAL_RANK", an integer device index), so a file without any of them and without a caller
# that has evidence cannot have it: the engine skips GPU-only rules there before parsing. Keep
# this in step with project/facts.py.
GPU_EVIDENCE_TEXT = re.compile(
    r"cuda|nccl|accelerator|device_ids|LOCAL_RANK|\.to\(\s*\d|device\s*=\s*\d|device\(\s*\d|xpu|Accelerator"
    r"|deepspeed|Trainer|Fabric|rank|gpu"
)

# the same needles, "mps" and "LightningCLI" (FileFacts.devices), a device named (FileFacts.device_moved) and
# the frameworks' imports, on the bytes: a file with none shows no accelerator (project/view.py
# `own_accelerated`), so a partial scan reads no facts for it
ACCELERATOR_EVIDENCE_BYTES = re.compile(GPU_EVIDENCE_TEXT.pattern.encode()
                                        + rb"|mps|LightningCLI|lightning|accelerate|(?i:device)")


@dataclass(frozen=True)
class DeviceFacts:
    gpu_evidence: bool
    pins_cpu: bool
    tpu: bool = False  # torch_xla: the accelerator is a TPU, and CUDA advice does not apply

    @property
    def cpu_only(self) -> bool:
        """Pins its device to "cpu" and shows no sign of a GPU, or runs on a TPU: no GPU rule applies."""
        return self.tpu or (self.pins_cpu and not self.gpu_evidence)


def device_facts(view: ProjectView) -> DeviceFacts:
    tpu = view.own.xla
    return DeviceFacts(gpu_evidence=(view.gpu or view.imported_cuda) and not tpu, pins_cpu=view.own.cpu_pinned,
                       tpu=tpu)


def may_have_gpu_evidence(text: str, view: "ProjectView | None") -> bool:
    """False only when the file cannot have GPU evidence (no caller has it, no needle in the text)."""
    if view is not None and (view.gpu_callers or view.imported_cuda_devices or view.inherited_cuda
                             or view.returned_cuda):
        return True
    return GPU_EVIDENCE_TEXT.search(text) is not None


def cuda_evidence(view: ProjectView) -> Evidence:
    """Whether the code runs on a CUDA GPU: shown by CUDA evidence here or in a caller (a "cuda"/"nccl"
    string, torch.cuda, `.cuda()`, an integer device, LOCAL_RANK), by a copy to a device a config module
    the file imports binds to CUDA (`x.to(CFG.device)`), that project base classes bind to CUDA at any depth
    (`x.to(self.device)`, ProjectView.inherited_cuda) or that a project function binds to CUDA on the object
    it returns (`x.to(opt.device)` for `opt = OptInit().get_args()`, ProjectView.returned_cuda), or by a
    framework that picks the GPU
    (Accelerate, DeepSpeed, a Lightning Trainer); refuted on a TPU, in a script that pins the CPU, or one
    that names MPS or XPU and never CUDA; otherwise undecided."""
    if view.own.xla:
        return REFUTED
    if view.gpu or "framework" in view.devices or view.imported_cuda:
        return SHOWN
    if view.devices & {"mps", "xpu"} or view.own.cpu_pinned:
        return REFUTED
    return UNDECIDED


def accelerator_evidence(view: ProjectView) -> Evidence:
    """Whether the code runs on an accelerator of any kind (CUDA, MPS, XPU): a loop whose batches are
    prepared between device steps leaves that device idle."""
    if view.own.xla:
        return SHOWN
    if view.gpu or view.devices:
        return SHOWN
    return REFUTED if view.own.cpu_pinned else UNDECIDED
