"""Test spec: outputs far below the absolute tolerance (weak signal: zeros would pass)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 1e-6


def get_inputs():
    return [torch.randn(16, 33)]


def get_init_inputs():
    return []
