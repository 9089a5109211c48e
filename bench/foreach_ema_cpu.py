"""GPU507's figure on a CPU: an EMA update as a Python loop over parameters against torch._foreach_*.

The parameters of an 80-layer MLP of width 64 (80 weights of 64x64 and 80 biases: 160 tensors), float32,
under torch.no_grad(). Prints the median time of one update for a loop of `e.mul_(d).add_(p, alpha=1 - d)` and the two
foreach calls the fix writes for it (`_foreach_mul_` + `_foreach_add_`), for a loop of `e.lerp_(p, 1 - d)` and
the call the fix writes for that (`_foreach_lerp_`), with the speedup over the first loop and the largest
difference of each from the first loop's result.
Run: python bench/foreach_ema_cpu.py [--threads N] [--repeats R] [--width W] [--layers L]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

Update = Callable[[list[torch.Tensor], list[torch.Tensor], float], None]


def loop(ema: list[torch.Tensor], params: list[torch.Tensor], d: float) -> None:
    for e, p in zip(ema, params):
        e.mul_(d).add_(p, alpha=1 - d)


def loop_lerp(ema: list[torch.Tensor], params: list[torch.Tensor], d: float) -> None:
    for e, p in zip(ema, params):
        e.lerp_(p, 1 - d)


def mul_add(ema: list[torch.Tensor], params: list[torch.Tensor], d: float) -> None:
    torch._foreach_mul_(ema, d)
    torch._foreach_add_(ema, params, alpha=1 - d)


def lerp(ema: list[torch.Tensor], params: list[torch.Tensor], d: float) -> None:
    torch._foreach_lerp_(ema, params, 1 - d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=80)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    params: list[torch.Tensor] = []
    for _ in range(args.layers):
        params += [torch.randn(args.width, args.width), torch.randn(args.width)]
    start = [torch.randn_like(p) for p in params]
    reference = [e.clone() for e in start]
    with torch.no_grad():
        loop(reference, params, 0.999)
        print(f"{len(params)} tensors, {args.threads} thread(s), median of {args.repeats} updates")
        base = None
        for name, update in (("python loop, mul_ + add_", loop), ("_foreach_mul_ + _foreach_add_", mul_add),
                             ("python loop, lerp_", loop_lerp), ("_foreach_lerp_", lerp)):
            ema = [e.clone() for e in start]
            update(ema, params, 0.999)
            diff = max(float((a - b).abs().max()) for a, b in zip(ema, reference))
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                update(ema, params, 0.999)
                times.append(time.perf_counter() - t0)
            median = statistics.median(times) * 1e3
            base = base or median
            print(f"{name:32s} {median:7.3f} ms  x{base / median:5.2f}  max |diff| vs loop {diff:.1e}")


if __name__ == "__main__":
    main()
