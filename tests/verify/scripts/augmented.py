"""Noise and flip augmentation drawn from torch's global generator in `__getitem__`, as torchvision transforms do.

Each item is a waveform synthesised from its index (its own generator), then augmented with
noise and a random flip from the global generator. gpulint rewrites four things: autocast
(GPU001), pinned memory (GPU101), loader workers (GPU102) and a fused Adam (GPU201). With
workers, each worker draws from a seed of its own, so the batches' augmentation differs from the
original's from the first step: another random stream, not mixed precision's doing.
"""

import math

import torch
from torch.utils.data import DataLoader, Dataset


class Waves(Dataset):
    def __init__(self, items: int) -> None:
        self.items = items
        self.t = torch.linspace(0, 1, 16)

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index)
        label = index % 2
        frequency = (1.0 + 2.0 * label) + 0.5 * torch.rand((), generator=g).item()
        wave = torch.sin(2 * math.pi * frequency * self.t + torch.rand((), generator=g).item())
        wave = wave + 0.3 * torch.randn(16)  # augmentation from the global generator
        if torch.rand(()) < 0.5:
            wave = -wave
        return wave, label


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Waves(4096), batch_size=64, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
