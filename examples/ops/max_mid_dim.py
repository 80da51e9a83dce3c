"""Reduction: amax over the middle dim of a 3-D tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(16, 64, 48)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 17, 5)]]
