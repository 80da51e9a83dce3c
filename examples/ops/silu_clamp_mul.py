"""Pointwise chain: clamp(silu(x), -1, 4) * x + 1."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, lo: float = -1.0, hi: float = 4.0):
        super().__init__()
        self.lo = lo
        self.hi = hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(F.silu(x), self.lo, self.hi) * x + 1.0


def get_inputs():
    return [torch.randn(8, 16, 33, 17)]


def get_init_inputs():
    return [-1.0, 4.0]


def get_extra_inputs():
    return [[torch.randn(3, 5, 7, 11)]]
