"""Style: a module-level helper function gelu_approx(x) (tanh form) called from forward."""

import math

import torch
import torch.nn as nn


def gelu_approx(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return gelu_approx(self.fc(x))


def get_inputs():
    return [torch.randn(4, 16, 64)]


def get_init_inputs():
    return [64]
