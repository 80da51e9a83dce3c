"""Pointwise: log(exp(0.3 x) + 1) * sqrt(|y| + 1e-3)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.log(torch.exp(x * 0.3) + 1.0) * torch.sqrt(torch.abs(y) + 1e-3)


def get_inputs():
    return [torch.randn(50, 400), torch.randn(50, 400)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(13, 17), torch.randn(13, 17)]]
