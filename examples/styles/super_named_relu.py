"""Style: super(Model, self).__init__() in a parameterless pointwise op, relu(x) * 2."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 33)]]
