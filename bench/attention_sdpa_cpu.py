"""GPU403's figure on a CPU: hand-written attention against F.scaled_dot_product_attention.

Causal self-attention of shape (batch, heads, T, head_dim), forward and backward, float32. Prints, for each
T: the bytes autograd keeps for backward (unique storages packed by saved_tensors_hooks, as in the facts
doc's checkpointing measurement), the median fwd+bwd time of each, and the largest output difference.
Run: python bench/attention_sdpa_cpu.py [--threads N] [--repeats R]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def manual(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    t = q.size(-2)
    mask = torch.tril(torch.ones(t, t))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ v


def fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def saved_bytes(attention: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(q, k, v).sum()
    inputs = {x.untyped_storage().data_ptr() for x in (q, k, v)}
    return sum(n for ptr, n in seen.items() if ptr not in inputs)


def step_time(attention: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        for x in (q, k, v):
            x.grad = None
        start = time.perf_counter()
        attention(q, k, v).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), batch 4, 8 heads, head_dim 64, float32, causal")
    print("T | saved for backward: manual -> SDPA | fwd+bwd: manual -> SDPA (speedup) | max |diff|")
    for t in (256, 512, 1024):
        q, k, v = (torch.randn(4, 8, t, 64, requires_grad=True) for _ in range(3))
        diff = (manual(q, k, v) - fused(q, k, v)).abs().max().item()
        m_bytes, f_bytes = saved_bytes(manual, q, k, v), saved_bytes(fused, q, k, v)
        m_time = step_time(manual, q, k, v, args.repeats)
        f_time = step_time(fused, q, k, v, args.repeats)
        print(f"{t} | {m_bytes / 2**20:.1f} MiB -> {f_bytes / 2**20:.1f} MiB | "
              f"{m_time * 1e3:.0f} ms -> {f_time * 1e3:.0f} ms ({m_time / f_time:.2f}x) | {diff:.1e}")


if __name__ == "__main__":
    main()
