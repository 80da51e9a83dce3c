"""Reduction: unbiased variance over the last dim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.var(x, dim=-1)


def get_inputs():
    return [torch.randn(90, 257) * 2 + 1]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 19)]]
