"""Pointwise: max(min(x, y), -0.5) + clamp(x, max=1.0)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.maximum(torch.minimum(x, y), torch.tensor(-0.5)) + torch.clamp(x, max=1.0)


def get_inputs():
    return [torch.randn(70, 256), torch.randn(70, 256)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 99), torch.randn(3, 99)]]
