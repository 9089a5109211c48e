"""Fused optimizers under FSDP's ShardedGradScaler: do the ranks agree on skipping a step?

    python bench/fsdp_fused_scaler.py            # two CPU ranks (gloo), prints one line per case

Two ranks train one FSDP-sharded linear layer with a ShardedGradScaler. On the second step rank 0's
gradient shard holds an inf, rank 1's does not. A scaled step must be skipped on every rank, and the
loss scales must stay equal, or the shards of one model drift apart. Four cases: Adam for-loop or
fused, each with and without `scaler.unscale_(optimizer)` before `scaler.step(optimizer)`.

With a fused optimizer and no `unscale_`, `GradScaler.step` takes the fused path and checks for
infs on each rank's own gradients only (`_check_inf_per_device`); ShardedGradScaler's all-reduce of
the inf flag lives in its `unscale_`, which that path never calls. So rank 0 skips, rank 1 steps,
and the scales split. Calling `scaler.unscale_(optimizer)` first does not rescue it in torch 2.13:
ShardedGradScaler's inf flag has shape [1], and the fused Adam kernel's in-place update of its
0-d step counters with it raises. So gpulint's GPU201 withholds `fused=True` under a
ShardedGradScaler, and the mixed-precision fix (GPU001) writes bfloat16 and no scaler for an
optimizer already fused under FSDP (GPU002 offers no scaler there). Measured on torch 2.13 CPU:

    Adam for-loop             step with the inf taken by rank 0/1: [False, False], scales [512.0, 512.0]
    Adam for-loop + unscale_  step with the inf taken by rank 0/1: [False, False], scales [512.0, 512.0]
    Adam fused                step with the inf taken by rank 0/1: [False, True], scales [512.0, 1024.0]
    Adam fused + unscale_     raises: output with shape [] doesn't match the broadcast shape [1]

tests/rules/test_fsdp_fused_scaler.py runs it (slow: two process groups a case).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = (("for-loop", False), ("for-loop", True), ("fused", False), ("fused", True))


def _one_case(rank: int, fused: bool, unscale: bool) -> dict[str, Any]:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    torch.manual_seed(0)
    model = FSDP(torch.nn.Linear(8, 8, bias=False), device_id=torch.device("cpu"), use_orig_params=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=fused)
    scaler = ShardedGradScaler("cpu", init_scale=1024.0)
    stepped = []
    for step in range(2):
        optimizer.zero_grad()
        loss = model(torch.ones(4, 8)).sum()
        scaler.scale(loss).backward()
        if step == 1 and rank == 0:
            for p in model.parameters():
                if p.grad is not None and p.grad.numel():
                    p.grad.view(-1)[0] = float("inf")  # an overflow in rank 0's shard only
        before = [p.detach().clone() for p in model.parameters()]
        if unscale:
            scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        stepped.append(any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters())))
    return {"stepped": stepped, "scale": float(scaler.get_scale())}


def _worker(rank: int, world: int, init_file: str, out_dir: str, fused: bool, unscale: bool) -> None:
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result: dict[str, Any] = _one_case(rank, fused, unscale)
    except RuntimeError as exc:  # recorded, not raised: the case's verdict is that it fails
        result = {"error": str(exc).splitlines()[0]}
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".part", "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(path + ".part", path)  # the verdict is on disk, whole, before any teardown
    dist.barrier()
    dist.destroy_process_group()
    # gloo's threads can abort the interpreter's own shutdown ("terminate called without an active
    # exception", seen once in CI): leave without running it, the result is already written.
    os._exit(0)


def run_case(fused: bool, unscale: bool) -> dict[str, Any]:
    """Whether the two ranks agreed on the step with the inf, and their scales (or the error)."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        try:
            mp.spawn(_worker, args=(2, init_file, tmp, fused, unscale), nprocs=2, join=True)
        except mp.ProcessExitedException:
            # A rank killed by a signal after it wrote its verdict died in teardown, not in the case.
            if not all(os.path.exists(os.path.join(tmp, f"rank{rank}.json")) for rank in range(2)):
                raise
        ranks = []
        for rank in range(2):
            with open(os.path.join(tmp, f"rank{rank}.json"), encoding="utf-8") as handle:
                ranks.append(json.load(handle))
    errors = [r["error"] for r in ranks if "error" in r]
    if errors:
        return {"agree": False, "error": errors[0]}
    r0, r1 = ranks
    return {
        "agree": r0["stepped"][1] == r1["stepped"][1] and r0["scale"] == r1["scale"],
        "stepped_on_inf": [r0["stepped"][1], r1["stepped"][1]],
        "scales": [r0["scale"], r1["scale"]],
    }


def run() -> dict[str, dict[str, Any]]:
    return {f"{name}{' + unscale_' if unscale else ''}": run_case(name == "fused", unscale) for name, unscale in CASES}


def main() -> int:
    results = run()
    print(f"torch {torch.__version__}, 2 CPU ranks (gloo), FSDP + ShardedGradScaler, inf in rank 0's shard")
    for case, result in results.items():
        if "error" in result:
            print(f"  Adam {case:<20} raises: {result['error']}")
            continue
        verdict = "ranks agree" if result["agree"] else "RANKS DIVERGE"
        print(f"  Adam {case:<20} step with the inf taken by rank 0/1: {result['stepped_on_inf']}, "
              f"scales {result['scales']}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
