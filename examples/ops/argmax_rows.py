"""Reduction: argmax over the last dim (int64 indices)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 250)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(9, 31)]]
