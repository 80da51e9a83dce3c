"""Pointwise: hardtanh(x * scale + bias) with per-channel [C, 1, 1] parameters."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)

    def forward(self, x):
        return F.hardtanh(x * self.scale + self.bias, min_val=-0.5, max_val=2.0)


CHANNELS = 16


def get_inputs():
    return [torch.randn(4, CHANNELS, 12, 12)]


def get_init_inputs():
    return [CHANNELS]


def get_extra_inputs():
    return [[torch.randn(3, CHANNELS, 5, 7)]]
