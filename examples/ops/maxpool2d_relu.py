"""Pooling: relu(max_pool2d(x, 2)) * 2."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(F.max_pool2d(x, 2)) * 2.0


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 3, 10, 6)]]
