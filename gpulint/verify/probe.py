"""What this machine can run, asked once before any training run: torch, CUDA, bfloat16, torchrun.

    python -m gpulint.verify.probe     # prints one JSON object

gpulint's own process never imports torch; this small subprocess does, with the same
environment the runs get (ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA included), so
"this CPU has no native bfloat16" is known up front rather than after a 12-minute timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import field
from typing import Any, Optional

from gpulint.records import dataclass

PROBE_TIMEOUT_S = 180
_cache: dict[tuple, "Machine"] = {}


@dataclass(frozen=True)
class Machine:
    torch: str
    cuda_available: bool
    cuda_devices: list[str] = field(default_factory=list)
    cpu_capability: Optional[str] = None
    cpu_bf16: str = "native"  # "native", "converted" (AVX-512 without bf16 instructions) or "emulated"
    cpu_fp16: str = "slow"  # "native" (AVX512-FP16/AMX-FP16) or "slow": float16 autocast through conversions
    cpu_fp16_autocast: bool = True  # torch runs float16 autocast on the CPU (2.2 and later)
    distributed: bool = False
    gloo: bool = False
    nccl: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ProbeError(Exception):
    """torch cannot be imported or queried; the message says why."""


def _probe() -> dict[str, Any]:
    import torch

    from gpulint.verify.harness import cpu_bf16, cpu_fp16

    info: dict[str, Any] = {"torch": torch.__version__, "cuda_available": bool(torch.cuda.is_available())}
    if info["cuda_available"]:
        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        info["cpu_capability"] = None
    info["cpu_bf16"] = cpu_bf16(torch)
    info["cpu_fp16"] = cpu_fp16()
    try:
        with torch.autocast("cpu", dtype=torch.float16):
            info["cpu_fp16_autocast"] = torch.ones(2, 2).matmul(torch.ones(2, 2)).dtype == torch.float16
    except (RuntimeError, AssertionError, TypeError):
        info["cpu_fp16_autocast"] = False
    try:
        import torch.distributed as dist

        info["distributed"] = bool(dist.is_available())
        info["gloo"] = bool(info["distributed"] and dist.is_gloo_available())
        info["nccl"] = bool(info["distributed"] and dist.is_nccl_available())
    except ImportError:
        info["distributed"] = info["gloo"] = info["nccl"] = False
    return info


def probe(env: Optional[dict[str, str]] = None) -> Machine:
    """Ask a subprocess (cached per interpreter and the environment variables that change the answer)."""
    env = dict(os.environ if env is None else env)
    key = (sys.executable, env.get("ATEN_CPU_CAPABILITY"), env.get("ONEDNN_MAX_CPU_ISA"),
           env.get("CUDA_VISIBLE_DEVICES"), env.get("PYTHONPATH"))
    if key in _cache:
        return _cache[key]
    try:
        completed = subprocess.run([sys.executable, "-m", "gpulint.verify.probe"], capture_output=True, text=True,
                                   env=env, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"importing torch took over {PROBE_TIMEOUT_S} s") from None
    except OSError as exc:
        raise ProbeError(f"cannot start {sys.executable}: {exc}") from None
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        detail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"cannot import torch: {detail}")
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise ProbeError(f"unexpected output from the torch probe: {lines[-1][:200]}") from None
    machine = Machine(**{k: v for k, v in data.items() if k in Machine.__dataclass_fields__})
    _cache[key] = machine
    return machine


def main() -> None:
    print(json.dumps(_probe()))


if __name__ == "__main__":
    main()
