"""Matmul -> bias -> tanh -> row sum: sum(tanh(linear(x)), dim=-1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, out_f: int):
        super().__init__()
        self.fc = nn.Linear(in_f, out_f)

    def forward(self, x):
        return torch.tanh(self.fc(x)).sum(dim=-1)


IN_F, OUT_F = 96, 80


def get_inputs():
    return [torch.randn(64, IN_F)]


def get_init_inputs():
    return [IN_F, OUT_F]


def get_extra_inputs():
    return [[torch.randn(5, IN_F)]]
