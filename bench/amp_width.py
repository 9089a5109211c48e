"""GPU001's impact floor (`min-width`): below which layer width can mixed precision not pay off?

Mixed precision speeds up a training step by running its matrix multiplications on tensor cores.
A step is also bounded below by the host: each op is dispatched by the CPU (Python, the
dispatcher, the kernel launch), whatever its size. When the GPU finishes an op faster than the
host can issue the next one, the step is launch-bound and faster math buys nothing (the PyTorch
AMP recipe: a network that "fails to saturate the GPU(s) with work ... is CPU bound" and "Amp's
effect on GPU performance won't matter").

This script measures, on this machine's CPU with the installed torch:

1. the host cost of one op, from a training step of an MLP whose tensors are so small that
   compute is nothing (median of many steps divided by the ops the profiler counts in it);
2. the ops per step of the same MLP in fp32 and under bf16 autocast (autocast adds casts).

and combines them with published GPU throughput (NVIDIA A100 datasheet: 19.5 TFLOP/s FP32,
312 TFLOP/s BF16 tensor cores) into the best step-time ratio AMP can reach for an MLP of width w
over `rows` input rows, per the roofline: step time ~ max(host time, GPU time). It is a model,
not a GPU measurement; it says where the ratio falls to ~1. Read it with its limits (figures and
sources in the team's facts file, shared/docs/pytorch-performance-facts.md):

- the host cost is CPU eager dispatch on this machine, without a CUDA launch (the facts file: "timing
  on CPU is not a good proxy for GPU overhead"); a busy build machine inflates it (10 us per op at a
  load of 10 on 2 cores, 2026-12-02), which raises the widths the model calls launch-bound;
- GPU time is the datasheet peak for matmuls only: small matmuls reach far less, elementwise ops
  (memory-bound, where 16 bits halve the bytes) and the optimizer step are left out, so the ratio
  is neither a strict upper nor a strict lower bound on a real step's;
- fp32 convolutions already use TF32 by default (`torch.backends.cudnn.allow_tf32` is True; facts
  file), so for convnets the model overstates what AMP adds;
- `min-width` ignores rows: past about 230K rows a step the model puts 64-wide layers above 1.5x
  too (256 x 1024 tokens: 1.7x), and GPU001 is then silent where AMP may pay.

    python bench/amp_width.py            # prints the table (about 20 s)
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

FP32_FLOPS = 19.5e12  # A100 SXM, dense FP32 (datasheet)
BF16_FLOPS = 312e12  # A100 SXM, dense BF16 tensor cores (datasheet)
LAYERS = 4
WIDTHS = (16, 32, 64, 128, 256, 512, 1024)
ROWS = (256, 2708, 16384, 65536)  # a small batch, a Cora-sized graph, 64 x 256 and 256 x 256 tokens


def mlp(width: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, amp: bool) -> None:
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    optimizer.step()


def ops_per_step(amp: bool) -> int:
    model = mlp(8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 8)
    step(model, optimizer, x, amp)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step(model, optimizer, x, amp)
    # top-level aten ops: what a GPU run would launch kernels for (nested calls are one op's parts)
    return sum(1 for e in prof.events() if e.name.startswith("aten::")
               and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))


def host_cost_per_op(ops: int, repeats: int = 400) -> float:
    model = mlp(8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 8)
    for _ in range(50):
        step(model, optimizer, x, False)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step(model, optimizer, x, False)
        times.append(time.perf_counter() - started)
    return statistics.median(times) / ops


def best_ratio(width: int, rows: int, host: float, ops32: int, ops16: int) -> float:
    """fp32 step time / AMP step time, each the larger of host dispatch and GPU math (matmuls only)."""
    flops = 3 * 2 * rows * width * width * LAYERS  # forward + two backward matmuls per layer
    fp32 = max(ops32 * host, flops / FP32_FLOPS)
    amp = max(ops16 * host, flops / BF16_FLOPS)
    return fp32 / amp


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ops32, ops16 = ops_per_step(False), ops_per_step(True)
    host = host_cost_per_op(ops32)
    print(f"torch {torch.__version__}, 1 CPU thread: {ops32} ops per fp32 step, {ops16} under bf16 autocast; "
          f"host cost {host * 1e6:.1f} us per op (median)")
    print()
    print("| width | " + " | ".join(f"{r} rows" for r in ROWS) + " |")
    print("|---:|" + "---:|" * len(ROWS))
    for width in WIDTHS:
        cells = [f"{best_ratio(width, rows, host, ops32, ops16):.2f}x" for rows in ROWS]
        print(f"| {width} | " + " | ".join(cells) + " |")
    # the model is linear in rows x width^2 between the host floor and the tensor-core roof: where it
    # reaches 1.5x (GPU001's `enough-work` premise: below it the advice cannot pay off)
    work = 1.5 * ops16 * host * FP32_FLOPS / (6 * LAYERS)
    print()
    print(f"rows x width^2 where the modelled ratio reaches 1.5x: {work:.3g} "
          f"(e.g. {work / 512 ** 2:,.0f} rows at 512 wide, {work / 256 ** 2:,.0f} at 256, "
          f"{work / 128 ** 2:,.0f} at 128)")


if __name__ == "__main__":
    main()
