"""Write a training script with one finding per training function: a script, not a test.

Issue 25 asks for the server's latency on a file with about 120 findings. Each function here builds its
own loader, model and optimizer and runs its loop (a GPU201 finding each: Adam without `fused=True`), so
`--functions 120` gives 120 findings in about 1,950 lines:

    python bench/many_findings.py /tmp/many/train_many.py --functions 120
    python bench/lsp_latency.py /tmp/many/train_many.py --large 0 --edits 10 --baseline /tmp/mainbase
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence


def training_script(functions: int) -> str:
    """The script's text: `functions` training functions, each called from the main guard."""
    lines = ["import torch", "import torch.nn as nn", "from torch.utils.data import DataLoader, TensorDataset", "",
             "device = torch.device('cuda')", ""]
    for i in range(functions):
        lines += [f"def train_{i}(epochs=3):",
                  "    data = TensorDataset(torch.randn(1024, 64), torch.randint(0, 10, (1024,)))",
                  "    loader = DataLoader(data, batch_size=32, shuffle=True)",
                  "    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)",
                  "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)",
                  "    for epoch in range(epochs):",
                  "        for x, y in loader:",
                  "            x, y = x.to(device), y.to(device)",
                  "            loss = nn.functional.cross_entropy(model(x), y)",
                  "            optimizer.zero_grad()",
                  "            loss.backward()",
                  "            optimizer.step()",
                  "    return model", "", ""]
    lines += ["if __name__ == '__main__':"] + [f"    train_{i}()" for i in range(functions)] + [""]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the script to write (its folder is made)")
    parser.add_argument("--functions", type=int, default=120, help="training functions (one finding each)")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(training_script(args.functions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
