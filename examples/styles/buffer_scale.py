"""Style: register_buffer for a persistent scale and a non-persistent shift, x * scale + shift."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, dim))
        self.register_buffer("shift", torch.arange(dim, dtype=torch.float32) / dim, persistent=False)

    def forward(self, x):
        return torch.tanh(x * self.scale + self.shift)


def get_inputs():
    return [torch.randn(16, 96)]


def get_init_inputs():
    return [96]


def get_extra_inputs():
    return [[torch.randn(5, 96)]]
