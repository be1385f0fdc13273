"""Attention written out by hand (no SDPA): scores, a causal mask built from arange, masked_fill, softmax."""

import math

import torch
from torch import nn


class ManualAttention(nn.Module):
    def __init__(self, dim=24, heads=3):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        pos = torch.arange(t)
        causal = pos[:, None] >= pos[None, :]
        probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.out((probs @ v).transpose(1, 2).reshape(b, t, c))


torch.manual_seed(1)
model = ManualAttention()
example_inputs = torch.randn(2, 7, 24)
