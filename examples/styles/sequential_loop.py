"""Style: nn.Sequential built from a list in a for loop inside __init__ (Linear/ReLU stack)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, depth):
        super(Model, self).__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(dim, dim), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(dim, 8)

    def forward(self, x):
        return self.head(self.body(x))


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 3]
