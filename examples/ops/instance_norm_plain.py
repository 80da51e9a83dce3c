"""Instance norm written in plain ops: normalise each (n, c) plane over H, W."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        mu = x.mean(dim=(2, 3), keepdim=True)
        var = ((x - mu) ** 2).mean(dim=(2, 3), keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5)


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 3, 5, 7)]]
