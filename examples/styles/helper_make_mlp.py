"""Style: a module-level helper function make_mlp(dims) that builds the nn.Sequential used by __init__."""

import torch
import torch.nn as nn


def make_mlp(dims, act=nn.ReLU):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


class Model(nn.Module):
    def __init__(self, dims):
        super(Model, self).__init__()
        self.mlp = make_mlp(dims)

    def forward(self, x):
        return self.mlp(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [[64, 128, 32]]
