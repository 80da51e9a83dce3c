"""Reduction: argmin over dim 1 of a 3-D tensor, keepdim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmin(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(8, 100, 30)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 7, 5)]]
