"""Pointwise chain: y = relu(x) * 2.5 + bias (broadcast over rows)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.5 + self.bias


BATCH, FEATURES = 64, 257


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [FEATURES]


def get_extra_inputs():
    return [[torch.randn(13, FEATURES)]]
