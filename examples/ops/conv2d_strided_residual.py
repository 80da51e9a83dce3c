"""Functional conv2d (stride 2, no bias) with a learned weight, tanh, plus a residual input."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4, 3, 3) * 0.2)

    def forward(self, x, r):
        return torch.tanh(F.conv2d(x, self.weight, stride=2, padding=1)) + r


def get_inputs():
    return [torch.randn(2, 4, 18, 18), torch.randn(2, 8, 9, 9)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 4, 7, 11), torch.randn(1, 8, 4, 6)]]
