"""A dataset whose difficulty grows with the number of items it has served: a counter in the dataset object.

Each item is a waveform synthesised from its index, with noise that grows as the dataset serves
more items. In worker processes every worker counts on its own copy, so with GPU102's workers the
data gets harder half as fast: the rewrite trains on other data. With GPU001, GPU101 and GPU201
applied too, only rerunning each rule alone shows which one does it.
"""

import math

import torch
from torch.utils.data import DataLoader, Dataset


class Curriculum(Dataset):
    def __init__(self, items: int) -> None:
        self.items = items
        self.t = torch.linspace(0, 1, 16)
        self.served = 0

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        self.served += 1
        difficulty = min(self.served / 300, 3.0)  # harder as training goes on
        g = torch.Generator().manual_seed(index)
        label = index % 2
        wave = torch.sin(2 * math.pi * (1.0 + 2.0 * label) * self.t + torch.rand((), generator=g).item())
        return wave + difficulty * torch.randn(16, generator=g), label


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Curriculum(4096), batch_size=32)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
