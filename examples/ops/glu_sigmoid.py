"""Pointwise gate: split the last dim in two halves, a * sigmoid(b)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return a * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(64, 2 * 160)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(7, 2 * 45)]]
