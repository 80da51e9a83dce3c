"""Pointwise: zero out values below a threshold, then scale: where(x > t, x, 0) * 1.5."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, t: float):
        super().__init__()
        self.t = t

    def forward(self, x):
        return torch.where(x > self.t, x, torch.zeros_like(x)) * 1.5


def get_inputs():
    return [torch.randn(60, 333)]


def get_init_inputs():
    return [0.25]


def get_extra_inputs():
    return [[torch.randn(7, 8)]]
