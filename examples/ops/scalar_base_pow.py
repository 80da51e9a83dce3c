"""Pointwise: 2 ** x - 1, scalar base with tensor exponent, then relu6."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.relu6(2.0 ** x - 1.0)


def get_inputs():
    return [torch.randn(128, 200) * 2]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 5) * 2]]
