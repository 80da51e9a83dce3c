"""Pooling: AvgPool2d(3, stride 2, padding 1) excluding padding from the divisor, then sigmoid."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)

    def forward(self, x):
        return torch.sigmoid(self.pool(x))


def get_inputs():
    return [torch.randn(2, 8, 17, 17)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 6, 9)]]
