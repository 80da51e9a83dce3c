"""Decoder stage: ConvTranspose3d (stride 2, output_padding 1) -> scale -> GELU -> GroupNorm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, groups: int, scale: float):
        super().__init__()
        self.up = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=3, stride=2, padding=1,
                                     output_padding=1)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.scale = scale

    def forward(self, x):
        x = self.up(x)
        x = x * self.scale
        x = F.gelu(x)
        return self.norm(x)


def get_inputs():
    return [torch.randn(2, 8, 4, 5, 3)]


def get_init_inputs():
    return [8, 12, 4, 0.5]


def get_extra_inputs():
    return [[torch.randn(1, 8, 3, 2, 5)]]
