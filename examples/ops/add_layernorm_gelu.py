"""Residual add, LayerNorm, then gelu: gelu(LN(x + y))."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x, y):
        return F.gelu(self.norm(x + y))


HIDDEN = 128


def get_inputs():
    return [torch.randn(8, 40, HIDDEN), torch.randn(8, 40, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]


def get_extra_inputs():
    return [[torch.randn(2, 3, HIDDEN), torch.randn(2, 3, HIDDEN)]]
