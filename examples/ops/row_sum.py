"""Row reduction: sum over the last dimension, keepdim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(96, 515)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(37, 1031)]]
