"""Depthwise conv2d (groups = channels) and silu: one direct conv kernel with the silu as its epilogue."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        return F.silu(self.dw(x))


def get_inputs():
    return [torch.randn(2, 8, 14, 14)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 8, 5, 9)]]
