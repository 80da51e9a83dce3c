"""Softmax over the last dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 384) * 3.0]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(9, 1000) * 3.0]]
