"""Pooling: MaxPool3d((2, 3, 3), stride 2, padding (0, 1, 1)) on [N, C, D, H, W], GELU, per-channel scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.pool = nn.MaxPool3d((2, 3, 3), stride=2, padding=(0, 1, 1))
        self.act = nn.GELU()
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1, 1))

    def forward(self, x):
        return self.act(self.pool(x)) * self.scale


def get_inputs():
    return [torch.randn(2, 4, 6, 10, 10)]


def get_init_inputs():
    return [4]


def get_extra_inputs():
    return [[torch.randn(1, 4, 5, 7, 9)]]
