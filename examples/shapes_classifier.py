"""Image classification: a small ResNet-style network on synthetic shapes, with CPU augmentation.

The input pipeline is the common one: a `Dataset` that draws and augments each image on the
CPU in `__getitem__`, a plain `DataLoader`, `.to(device)` in the loop and a for-loop Adam.
On a GPU the model waits for the loader. gpulint reports:

- GPU102: the loader draws and augments every image in the training process;
- GPU201: Adam runs one kernel per parameter;
- GPU501 (preview): `.item()` reads the GPU on every step.

It does not report GPU001: the network is 16 and 32 channels wide, below `min-width` (launch-bound:
tensor cores buy nothing). GPU101 only with `strictness = "pedantic"`: whether pinning pays off for
its blocking `.to(device)` copy of drawn images is not decided.

    python examples/shapes_classifier.py --epochs 1
    gpulint verify examples/shapes_classifier.py -- --epochs 1
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

CLASSES = ("circle", "square", "cross", "ring")


class Shapes(Dataset):
    """Shapes drawn at a random place and size, then jittered, flipped and noised."""

    def __init__(self, items: int, side: int = 32, seed: int = 0) -> None:
        self.items, self.side, self.seed = items, side, seed
        axis = torch.linspace(-1, 1, side)
        self.ys, self.xs = torch.meshgrid(axis, axis, indexing="ij")

    def __len__(self) -> int:
        return self.items

    def draw(self, label: int, g: torch.Generator) -> torch.Tensor:
        cx, cy = (torch.rand(2, generator=g) - 0.5).tolist()
        size = 0.3 + 0.4 * torch.rand((), generator=g).item()
        dx, dy = self.xs - cx, self.ys - cy
        if label == 0:
            mask = dx ** 2 + dy ** 2 < size ** 2
        elif label == 1:
            mask = (dx.abs() < size) & (dy.abs() < size)
        elif label == 2:
            mask = ((dx.abs() < size / 4) | (dy.abs() < size / 4)) & (dx.abs() < size) & (dy.abs() < size)
        else:
            radius = (dx ** 2 + dy ** 2).sqrt()
            mask = (radius < size) & (radius > size * 0.6)
        colour = torch.rand(3, 1, 1, generator=g) * 0.6 + 0.4
        return mask.float().unsqueeze(0) * colour

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + index)
        label = index % len(CLASSES)
        image = self.draw(label, g)
        if torch.rand((), generator=g) < 0.5:
            image = image.flip(-1)
        angle = (torch.rand((), generator=g).item() - 0.5) * math.pi / 6
        theta = torch.tensor([[math.cos(angle), -math.sin(angle), 0.0], [math.sin(angle), math.cos(angle), 0.0]])
        grid = F.affine_grid(theta.unsqueeze(0), [1, 3, self.side, self.side], align_corners=False)
        image = F.grid_sample(image.unsqueeze(0), grid, align_corners=False).squeeze(0)
        image = image + 0.05 * torch.randn(image.shape, generator=g)
        return (image - 0.25) / 0.3, label


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):
    def __init__(self, width: int = 16, classes: int = len(CLASSES)) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stage1 = Block(width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.stage2 = Block(2 * width)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(F.relu(self.down(self.stage1(self.stem(x)))))
        return self.head(x.mean(dim=(2, 3)))


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a small ResNet on synthetic shapes.")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--items", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set = Shapes(args.items)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = SmallResNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        correct = seen = 0
        for step, (images, labels) in enumerate(loader):
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == labels).sum().item()
            seen += labels.numel()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f} accuracy {correct / seen:.2f}")


if __name__ == "__main__":
    main()
