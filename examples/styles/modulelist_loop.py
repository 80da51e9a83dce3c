"""Style: nn.ModuleList filled in a loop and iterated in forward with residual adds."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, num_layers):
        super(Model, self).__init__()
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(nn.Linear(dim, dim))

    def forward(self, x):
        for layer in self.layers:
            x = x + F.silu(layer(x))
        return x


def get_inputs():
    return [torch.randn(4, 8, 48)]


def get_init_inputs():
    return [48, 3]
