"""Test spec: a softmax written without the max subtraction. Column 3 of every row is 100,
so exp overflows float32 there: eager gives inf / inf = NaN at that column (and 0 at the
others), while the float64 run of the same inputs is finite (1.0 there, ~1e-44 elsewhere)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    x = torch.randn(64, 257)
    x[:, 3] = 100.0
    return [x]


def get_init_inputs():
    return []
