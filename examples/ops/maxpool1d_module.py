"""Pooling: MaxPool1d(3, stride 2, padding 1) on [N, C, L] minus a learned shift."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.pool = nn.MaxPool1d(3, stride=2, padding=1)
        self.shift = nn.Parameter(torch.randn(channels, 1) * 0.1)

    def forward(self, x):
        return self.pool(x) - self.shift


def get_inputs():
    return [torch.randn(4, 12, 90)]


def get_init_inputs():
    return [12]


def get_extra_inputs():
    return [[torch.randn(2, 12, 13)]]
