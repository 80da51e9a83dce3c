"""Batch norm with training statistics, in plain ops over dims (0, 2, 3) with affine."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)
        self.beta = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)

    def forward(self, x):
        mu = x.mean(dim=(0, 2, 3), keepdim=True)
        var = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
        return (x - mu) * torch.rsqrt(var + 1e-5) * self.gamma + self.beta


CHANNELS = 12


def get_inputs():
    return [torch.randn(8, CHANNELS, 8, 8)]


def get_init_inputs():
    return [CHANNELS]


def get_extra_inputs():
    return [[torch.randn(3, CHANNELS, 5, 3)]]
