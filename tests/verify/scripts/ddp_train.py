"""A DDP training script written for GPUs: NCCL, one device per rank, a DistributedSampler.

Launched by torchrun (RANK, LOCAL_RANK, WORLD_SIZE); on the CPU, verify runs it with gloo.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("nccl")
rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(local_rank)
model = DDP(model, device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
generator = torch.Generator().manual_seed(1234)
x = torch.randn(1024, 16, generator=generator)
y = x[:, :4].sum(dim=1, keepdim=True)
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=128, sampler=sampler)
for epoch in range(100):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        xb, yb = xb.to(local_rank, non_blocking=True), yb.to(local_rank, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
dist.destroy_process_group()
