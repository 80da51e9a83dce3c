"""Residual MLP block: x + fc2(relu(fc1(layernorm(x)))), then relu."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return torch.relu(x + self.fc2(torch.relu(self.fc1(self.norm(x)))))


DIM = 64


def get_inputs():
    return [torch.randn(4, 16, DIM)]


def get_init_inputs():
    return [DIM]


def get_extra_inputs():
    return [[torch.randn(1, 3, DIM)]]
