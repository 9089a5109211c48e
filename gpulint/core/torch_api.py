"""Torch names, argument positions and defaults that rules on `ast` match (issue 25).

One table per concept, each in the section of the rule family that added it; the owner of this
module (i25-api) keeps the shared sections. Names are the qualified names `AstNames.qualname`
gives (through any import alias); every set was checked against torch's own modules
(docs/pytorch-performance-facts.md, section 0).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------------
# r26-data: optimizers and GradScaler (GPU202), tensor factories (GPU105), DataLoader (GPU103/104)
# (written before i25-api's version of this module landed: merge the sections at review)
# ------------------------------------------------------------------------------------------------

SGD = frozenset({"torch.optim.SGD", "torch.optim.sgd.SGD"})
# SGD(params, lr, momentum, dampening, weight_decay, nesterov, *, maximize, foreach, differentiable, fused)
SGD_MOMENTUM_POSITION = 2

GRAD_SCALERS = frozenset({
    "torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
})
# GradScaler(device="cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled);
# torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled)
GRAD_SCALER_ENABLED_POSITION = {"new": 5, "cuda": 4}

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory,
#            drop_last, timeout, worker_init_fn, multiprocessing_context, generator, *, prefetch_factor,
#            persistent_workers, pin_memory_device, in_order)
DATALOADER_POSITIONS = {"dataset": 0, "num_workers": 5, "collate_fn": 6, "pin_memory": 7}

# factories whose values do not depend on a random stream: `device=` makes the same tensor on the device
DETERMINISTIC_FACTORIES = frozenset(f"torch.{name}" for name in (
    "zeros", "ones", "full", "empty", "arange", "eye", "linspace", "logspace", "tensor",
    "zeros_like", "ones_like", "full_like", "empty_like",
))
# factories that draw from the generator of the device they run on: CPU and CUDA streams differ
RANDOM_FACTORIES = frozenset(f"torch.{name}" for name in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
))
