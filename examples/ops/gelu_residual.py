"""Pointwise: gelu(x) + 0.5 * x (exact erf gelu)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x) + x * 0.5


def get_inputs():
    return [torch.randn(8, 64, 64)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 5, 13)]]
