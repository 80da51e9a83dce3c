"""GroupNorm (nn.GroupNorm) over NCHW with affine parameters."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


CHANNELS = 16


def get_inputs():
    return [torch.randn(4, CHANNELS, 10, 10)]


def get_init_inputs():
    return [CHANNELS, 4]


def get_extra_inputs():
    return [[torch.randn(2, CHANNELS, 5, 3)]]
