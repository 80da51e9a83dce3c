"""Style: a list argument dims=[64, 128, 32] zipped into a ModuleList of Linear layers."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dims=[64, 128, 32]):  # noqa: B006 - the common style on purpose
        super(Model, self).__init__()
        self.fcs = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])

    def forward(self, x):
        for i, fc in enumerate(self.fcs):
            x = fc(x)
            if i < len(self.fcs) - 1:
                x = F.leaky_relu(x, 0.1)
        return x


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [[64, 128, 32]]
