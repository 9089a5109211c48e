"""Train a two-layer causal language model whose attention is written by hand (gpulint GPU403).

The tokens repeat a short random cycle, so the loss falls within a few steps. `gpulint verify
--select GPU403` runs it against its rewrite to F.scaled_dot_product_attention: same loss within
the rule's tolerance, fewer bytes saved for backward.

    python manual_attention_lm.py --size tiny
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

SIZES = {"tiny": dict(vocab=32, width=32, heads=4, seq=64, batch=8), "gpu": dict(vocab=512, width=512, heads=8,
                                                                                  seq=1024, batch=16)}


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.attn_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class LanguageModel(nn.Module):
    def __init__(self, vocab: int, width: int, heads: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(seq, width)
        self.layers = nn.ModuleList(CausalSelfAttention(width, heads, seq) for _ in range(2))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in self.layers:
            x = x + layer(x)
        return self.head(self.norm(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    cfg = SIZES[args.size]
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cycle = torch.randint(0, cfg["vocab"], (7,))
    corpus = cycle.repeat(cfg["seq"] * 4)
    model = LanguageModel(cfg["vocab"], cfg["width"], cfg["heads"], cfg["seq"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(args.steps):
        starts = torch.randint(0, len(corpus) - cfg["seq"] - 1, (cfg["batch"],)).tolist()
        x = torch.stack([corpus[s:s + cfg["seq"]] for s in starts]).to(device)
        y = torch.stack([corpus[s + 1:s + cfg["seq"] + 1] for s in starts]).to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
