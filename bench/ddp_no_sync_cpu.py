"""GPU506's rewrite checked on the CPU: DDP gradient accumulation with and without no_sync(), 2 processes (gloo).

Each version trains the same MLP on the same per-rank batches for 12 micro-steps with an accumulation of 4:
the original loop as the rule finds it (backward on every micro-step, the step under `(i + 1) % accum == 0`),
and the loop as the fix writes it (forward and backward under `contextlib.nullcontext() if <condition> else
model.no_sync()`). Prints how many bucket all-reduces each ran (a counting communication hook) and the
largest difference between the final parameters.
Run: python bench/ddp_no_sync_cpu.py
"""

import contextlib
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUM, MICRO_STEPS, WORLD = 4, 12, 2


def train(rank: int, rewritten: bool) -> tuple[int, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
    calls = [0]

    # DDP checks the hook's annotations at run time: they must be the classes, not strings
    def counting(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        calls[0] += 1
        return default_hooks.allreduce_hook(state, bucket)  # type: ignore[arg-type]

    model.register_comm_hook(None, counting)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1 + rank)
    batches = [(torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)) for _ in range(MICRO_STEPS)]
    for i, (x, y) in enumerate(batches):
        boundary = (i + 1) % ACCUM == 0
        context = contextlib.nullcontext() if boundary or not rewritten else model.no_sync()
        with context:
            loss = (model(x) - y).pow(2).mean() / ACCUM
            loss.backward()
        if boundary:
            optimizer.step()
            optimizer.zero_grad()
    return calls[0], [p.detach().clone() for p in model.parameters()]


def run(rank: int, folder: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results = {label: train(rank, label == "no_sync") for label in ("every micro-step", "no_sync")}
    if rank == 0:
        torch.save(results, os.path.join(folder, "results.pt"))
    dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(run, args=(folder,), nprocs=WORLD)
        results = torch.load(os.path.join(folder, "results.pt"))
    for label, (calls, _) in results.items():
        print(f"{label:18s} bucket all-reduces on rank 0: {calls} ({MICRO_STEPS} micro-steps, accumulation {ACCUM})")
    (_, a), (_, b) = results.values()
    print(f"largest parameter difference after training: {max(float((x - y).abs().max()) for x, y in zip(a, b)):.1e}")


if __name__ == "__main__":
    main()
