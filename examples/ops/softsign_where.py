"""Pointwise: where(x > 0, softsign(x), 0.1 * |x|)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.where(x > 0, F.softsign(x), torch.abs(x) * 0.1)


def get_inputs():
    return [torch.randn(64, 300)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(9, 33)]]
