"""A plain function (not a module) as the program: a two-layer GELU MLP in float16 with the weights as inputs."""

import torch
from torch.nn import functional as F


def model(x, w1, b1, w2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2)


torch.manual_seed(2)
example_inputs = (
    torch.randn(3, 5, 16, dtype=torch.float16),
    torch.randn(40, 16, dtype=torch.float16) * 0.25,
    torch.randn(40, dtype=torch.float16),
    torch.randn(16, 40, dtype=torch.float16) * 0.25,
)
