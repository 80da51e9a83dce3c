"""Test spec: the reference never returns."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            x = x + 0
        return x


def get_inputs():
    return [torch.randn(4, 3)]


def get_init_inputs():
    return []
