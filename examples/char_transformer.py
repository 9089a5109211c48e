"""Language model: a character-level transformer trained with float16 autocast, the old way.

Written as many training scripts written before torch 2.4 still are: `torch.cuda.amp.autocast()`
(deprecated), float16 without a GradScaler (small gradients flush to zero), gradient
accumulation, and AdamW without `fused=True`. gpulint reports GPU003, GPU002 and GPU201.
The corpus is a few paragraphs kept in this file, so the script runs anywhere.

    python examples/char_transformer.py --steps 200
    gpulint verify examples/char_transformer.py
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

CORPUS = """\
A training step has three parts: move a batch to the device, run the model forward and
backward, and update the weights. When any part waits for another, the accelerator idles.
Data loading that runs in the training process, copies from memory the driver must stage,
optimizers that launch one small kernel per tensor, and arithmetic in a wider format than the
hardware needs are the usual reasons. None of them shows in the loss curve; all of them show
in the bill. A linter can find them in the source before the job is ever scheduled, and a
short run of the old and the new script side by side shows what the change is worth.
"""


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, context: int, width: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        steps = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(steps, device=idx.device))
        x = self.encoder(x, mask=self.causal[:steps, :steps], is_causal=True)
        return self.head(self.norm(x))


def batches(data: torch.Tensor, context: int, batch_size: int, generator: torch.Generator):
    while True:
        starts = torch.randint(0, len(data) - context - 1, (batch_size,), generator=generator)
        x = torch.stack([data[s:s + context] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + context + 1] for s in starts.tolist()])
        yield x, y


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a character-level transformer.")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accumulate", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    vocab = sorted(set(CORPUS))
    data = torch.tensor([vocab.index(c) for c in CORPUS])
    model = CharTransformer(len(vocab), args.context).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    loss_fn = nn.CrossEntropyLoss()
    stream = batches(data, args.context, args.batch_size, torch.Generator().manual_seed(0))

    for step in range(args.steps):
        for _ in range(args.accumulate):
            x, y = next(stream)
            x, y = x.to(device), y.to(device)
            with torch.cuda.amp.autocast():
                logits = model(x)
                loss = loss_fn(logits.flatten(0, 1), y.flatten()) / args.accumulate
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(f"step {step} loss {loss.item() * args.accumulate:.3f}")


if __name__ == "__main__":
    main()
