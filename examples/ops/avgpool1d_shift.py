"""Pooling: avg_pool1d with kernel 4 / stride 2, then a shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.avg_pool1d(x, kernel_size=4, stride=2) + 1.0


def get_inputs():
    return [torch.randn(8, 16, 128)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 3, 30)]]
