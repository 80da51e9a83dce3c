"""Pointwise: (x - center) / spread with learned per-feature parameters."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.center = nn.Parameter(torch.randn(features))
        self.spread = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x):
        return (x - self.center) / self.spread


FEATURES = 96


def get_inputs():
    return [torch.randn(40, 6, FEATURES)]


def get_init_inputs():
    return [FEATURES]


def get_extra_inputs():
    return [[torch.randn(3, 2, FEATURES)]]
