"""Linear, gelu (tanh form) and a residual add: x + gelu(W x + b)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + F.gelu(self.fc(x), approximate='tanh')


DIM = 96


def get_inputs():
    return [torch.randn(64, DIM)]


def get_init_inputs():
    return [DIM]


def get_extra_inputs():
    return [[torch.randn(9, DIM)]]
