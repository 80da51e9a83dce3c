"""Linear without bias times a learned per-output scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, out_f: int):
        super().__init__()
        self.proj = nn.Linear(in_f, out_f, bias=False)
        self.scale = nn.Parameter(torch.rand(out_f) + 0.5)

    def forward(self, x):
        return self.proj(x) * self.scale


IN_F, OUT_F = 64, 72


def get_inputs():
    return [torch.randn(4, 16, IN_F)]


def get_init_inputs():
    return [IN_F, OUT_F]


def get_extra_inputs():
    return [[torch.randn(2, 3, IN_F)]]
