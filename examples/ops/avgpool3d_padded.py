"""Pooling: avg_pool3d, window (2, 3, 3), stride (1, 2, 2), padding 1 excluded from the divisor, then tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = F.avg_pool3d(x, kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=1, count_include_pad=False)
        return torch.tanh(y)


def get_inputs():
    return [torch.randn(2, 3, 5, 12, 12)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 3, 7, 9)]]
