"""Test spec: output equals the input up to 1e-6 (weak signal: returning the input would pass)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1e-6 * torch.sin(x)


def get_inputs():
    return [torch.randn(16, 33) * 100.0]


def get_init_inputs():
    return []
