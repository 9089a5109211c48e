"""Benchmark, not a test: what bfloat16 autocast costs on this CPU, with and without native bfloat16.

    .venv/bin/python bench/verify_bf16_cpu.py [--steps 20]

Times a training step of a small MLP (fp32, then under CPU bf16 autocast) in fresh processes:
once as this machine is, once with ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2, which
make torch use its AVX2 kernels as on a CPU without native bfloat16. Prints the ratio bf16/fp32
for both, and what `gpulint verify`'s probe reports for each (the up-front detection that turns
a mixed-precision verification into a short numerics-only check).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

STEP = '''
import json, sys, time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512)
out = {}
for mode in ("fp32", "bf16"):
    times = []
    for step in range(int(sys.argv[1]) + 3):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        times.append(time.perf_counter() - start)
    times = sorted(times[3:])
    out[mode] = times[len(times) // 2]
print(json.dumps(out))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    emulated = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    for label, extra in (("this CPU as it is", {}), ("AVX2 kernels (no native bf16)", emulated)):
        env = dict(os.environ, **extra)
        timing = json.loads(subprocess.run([sys.executable, "-c", STEP, str(args.steps)], env=env, check=True,
                                           capture_output=True, text=True).stdout)
        probe = json.loads(subprocess.run([sys.executable, "-m", "gpulint.verify.probe"], env=env, check=True,
                                          capture_output=True, text=True).stdout)
        print(f"{label}: fp32 {timing['fp32'] * 1000:.1f} ms, bf16 autocast {timing['bf16'] * 1000:.1f} ms a step: "
              f"bf16/fp32 = {timing['bf16'] / timing['fp32']:.2f}x; probe: capability {probe['cpu_capability']}, "
              f"bfloat16 {probe['cpu_bf16']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
