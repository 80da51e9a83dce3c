"""Pointwise: mish(x) + softplus(x, beta=2, threshold=10)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x) + F.softplus(x, beta=2.0, threshold=10.0)


def get_inputs():
    return [torch.randn(40, 512) * 6]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 1001) * 6]]
