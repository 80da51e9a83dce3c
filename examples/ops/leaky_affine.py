"""Pointwise: leaky_relu(x * w + b, 0.2) with per-feature scale and shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(features) + 0.5)
        self.shift = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return F.leaky_relu(x * self.weight + self.shift, negative_slope=0.2)


FEATURES = 200


def get_inputs():
    return [torch.randn(48, FEATURES)]


def get_init_inputs():
    return [FEATURES]


def get_extra_inputs():
    return [[torch.randn(11, FEATURES)]]
