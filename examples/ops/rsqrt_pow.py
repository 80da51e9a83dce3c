"""Pointwise: rsqrt(x^2 + 1) * |x|^1.5 + x^3."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.rsqrt(x * x + 1.0) * torch.pow(torch.abs(x), 1.5) + x ** 3


def get_inputs():
    return [torch.randn(32, 32, 20)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 3, 11)]]
