"""Reduction with prologue: the values of torch.min(relu(x) - 1, dim=-1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.min(torch.relu(x) - 1.0, dim=-1)[0]


def get_inputs():
    return [torch.randn(96, 140)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(4, 9)]]
