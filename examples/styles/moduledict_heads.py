"""Style: nn.ModuleDict of named heads built in a loop, their outputs concatenated in forward."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, head_sizes):
        super(Model, self).__init__()
        self.trunk = nn.Linear(dim, dim)
        self.heads = nn.ModuleDict()
        for name, size in head_sizes.items():
            self.heads[name] = nn.Linear(dim, size)

    def forward(self, x):
        h = torch.relu(self.trunk(x))
        return torch.cat([self.heads[k](h) for k in self.heads], dim=-1)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, {"cls": 10, "box": 4, "obj": 1}]
