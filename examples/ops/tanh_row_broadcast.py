"""Pointwise: tanh(x / (1 + |y|)) with y broadcast over rows [1, N]."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.tanh(x / (1.0 + torch.abs(y)))


def get_inputs():
    return [torch.randn(96, 200), torch.randn(1, 200)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 21), torch.randn(1, 21)]]
