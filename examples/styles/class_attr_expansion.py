"""Style: a class attribute expansion = 4 on Model read as self.expansion in __init__ (bottleneck MLP)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    expansion = 4

    def __init__(self, dim):
        super(Model, self).__init__()
        self.fc_in = nn.Linear(dim, dim * self.expansion)
        self.fc_out = nn.Linear(dim * self.expansion, dim)

    def forward(self, x):
        return self.fc_out(torch.relu(self.fc_in(x)))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32]
