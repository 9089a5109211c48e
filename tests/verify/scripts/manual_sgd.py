"""No torch.optim optimizer: the parameters are updated by hand, as in many tutorials."""

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
w = torch.zeros(4, 1, device=device, requires_grad=True)
x = torch.randn(64, 4, device=device)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]], device=device)
for step in range(500):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w.data.add_(w.grad, alpha=-0.05)
        w.grad.zero_()
