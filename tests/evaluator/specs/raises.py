"""Test spec: the reference raises when run."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ torch.randn(7, 5)


def get_inputs():
    return [torch.randn(4, 3)]


def get_init_inputs():
    return []
