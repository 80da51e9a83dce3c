"""Reduction: logsumexp over the last dim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 400) * 4]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(9, 77) * 4]]
