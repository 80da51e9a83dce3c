"""Pointwise chain: tanh(gelu(x) - 0.5) * sigmoid(y)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.tanh(F.gelu(x) - 0.5) * torch.sigmoid(y)


def get_inputs():
    return [torch.randn(32, 1000), torch.randn(32, 1000)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(7, 333), torch.randn(7, 333)]]
