"""Scan: reverse cumulative product over the last dim (flip, cumprod, flip)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.flip(torch.cumprod(torch.flip(1.0 + 0.01 * x, dims=[-1]), dim=-1), dims=[-1])


def get_inputs():
    return [torch.randn(32, 100)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 17)]]
