"""Clamp to [-1, 1] and scale: an element-wise operator on an odd shape."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -1.0, 1.0) * self.scale


def get_inputs():
    return [torch.randn(7, 333) * 2.0]


def get_init_inputs():
    return [0.75]
