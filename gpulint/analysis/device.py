"""Does this file target a GPU, or is it explicitly CPU-only?

GPU-only rules fire only where a GPU is plausible: a file with GPU evidence, or (for the
rules that say so) any file that does not pin itself to the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from gpulint.analysis.names import NameTable
from gpulint.engine.walk import walk

_CPU_KEYWORDS = {"device", "accelerator"}
# Every kind of GPU evidence the scan below accepts spells one of these in the file's text
# (a "cuda..."/"nccl" string, torch.cuda / torch.accelerator, `.cuda(`, `device_ids=`), so a
# file without any of them cannot have GPU evidence: the engine skips GPU-only rules there
# before parsing. Keep this in step with `_Scan`.
GPU_EVIDENCE_NEEDLES = ("cuda", "nccl", "accelerator", "device_ids")


@dataclass(frozen=True)
class DeviceFacts:
    gpu_evidence: bool
    pins_cpu: bool

    @property
    def cpu_only(self) -> bool:
        """Pins its device to "cpu" and shows no sign of a GPU."""
        return self.pins_cpu and not self.gpu_evidence


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_cuda_string(value: str | None) -> bool:
    return value is not None and (value == "cuda" or value.startswith("cuda:") or value == "nccl")


class _Scan(cst.CSTVisitor):
    def __init__(self, names: NameTable) -> None:
        self.names = names
        self.gpu = False
        self.cpu = False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # evaluating a literal costs a compile(); most strings can be ruled out from their source
        if not self.gpu and ("cuda" in node.value or "nccl" in node.value) and _is_cuda_string(_string(node)):
            self.gpu = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.gpu:
            return
        qualified = self.names.qualified_name(node)
        if qualified and (qualified.startswith("torch.cuda") or qualified.startswith("torch.accelerator")):
            self.gpu = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            self.gpu = True
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "device_ids":
                self.gpu = True
            if arg.keyword is not None and arg.keyword.value in _CPU_KEYWORDS and _string(arg.value) == "cpu":
                self.cpu = True
        qualified = self.names.qualified_name(func)
        first = node.args[0].value if node.args and node.args[0].keyword is None else None
        if first is not None and _string(first) == "cpu":
            if qualified == "torch.device" or (isinstance(func, cst.Attribute) and func.attr.value == "to"):
                self.cpu = True

    def visit_Assign(self, node: cst.Assign) -> None:
        if _string(node.value) != "cpu":
            return
        for target in node.targets:
            name = target.target
            label = name.value if isinstance(name, cst.Name) else (
                name.attr.value if isinstance(name, cst.Attribute) else "")
            if "device" in label.lower():
                self.cpu = True


def device_facts(module: cst.Module, names: NameTable) -> DeviceFacts:
    scan = _Scan(names)
    walk(module, scan)
    return DeviceFacts(gpu_evidence=scan.gpu, pins_cpu=scan.cpu)
