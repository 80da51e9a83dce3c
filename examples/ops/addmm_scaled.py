"""addmm with beta and alpha: 0.5 * bias + 2 * (a @ b)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_out: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n_out))

    def forward(self, a, b):
        return torch.addmm(self.bias, a, b, beta=0.5, alpha=2.0)


N_OUT = 80


def get_inputs():
    return [torch.randn(64, 96), torch.randn(96, N_OUT)]


def get_init_inputs():
    return [N_OUT]


def get_extra_inputs():
    return [[torch.randn(7, 5), torch.randn(5, N_OUT)]]
