"""Style: module-level lowercase constants (eps, hidden) read by __init__ and forward."""

import torch
import torch.nn as nn

eps = 1e-6
hidden = 256
in_dim = 64


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.up = nn.Linear(in_dim, hidden)
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        h = self.up(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return h * self.weight


def get_inputs():
    return [torch.randn(8, in_dim)]


def get_init_inputs():
    return []
