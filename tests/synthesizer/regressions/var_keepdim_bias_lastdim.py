"""Unbiased variance over the last two dims kept, plus a bias broadcast over rows."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        v = torch.var(x, dim=(-2, -1), keepdim=True)
        return (x - x.mean(dim=(-2, -1), keepdim=True)) / torch.sqrt(v + self.shift.abs() + 1e-5)


def get_inputs():
    return [torch.randn(3, 7, 5, 11)]


def get_init_inputs():
    return [7]
