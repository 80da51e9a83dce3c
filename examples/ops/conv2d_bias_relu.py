"""Conv2d followed by a per-channel scale and relu (pointwise epilogue)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.scale = nn.Parameter(torch.rand(cout, 1, 1) + 0.5)

    def forward(self, x):
        return torch.relu(self.conv(x) * self.scale)


def get_inputs():
    return [torch.randn(2, 3, 20, 20)]


def get_init_inputs():
    return [3, 8]


def get_extra_inputs():
    return [[torch.randn(1, 3, 9, 13)]]
