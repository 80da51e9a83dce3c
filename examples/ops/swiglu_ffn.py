"""SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


DIM, HIDDEN = 64, 96


def get_inputs():
    return [torch.randn(40, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]


def get_extra_inputs():
    return [[torch.randn(3, DIM)]]
