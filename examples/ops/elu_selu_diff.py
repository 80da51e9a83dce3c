"""Pointwise: elu(x, alpha=0.7) - selu(y)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return F.elu(x, alpha=0.7) - torch.selu(y)


def get_inputs():
    return [torch.randn(16, 30, 40), torch.randn(16, 30, 40)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 7, 9), torch.randn(3, 7, 9)]]
