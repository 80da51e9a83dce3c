"""Scan: exclusive cumulative sum over dim 1 of a 3-D tensor (cumsum - x)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1) - x


def get_inputs():
    return [torch.randn(6, 120, 20)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 9, 5)]]
