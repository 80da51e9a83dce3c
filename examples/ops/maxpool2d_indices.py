"""Pooling with indices."""

# Pooling with indices: MaxPool2d(3, stride 2, padding 1, ceil_mode, return_indices) on
# [N, C, H, W] (the encoder half of a max-unpooling segmentation net), values scaled per
# channel, and the int64 argmax positions within each input plane.

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True, return_indices=True)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))

    def forward(self, x):
        values, indices = self.pool(x)
        return values * self.scale, indices


def get_inputs():
    return [torch.randn(2, 8, 17, 20)]


def get_init_inputs():
    return [8]


def get_extra_inputs():
    return [[torch.randn(1, 8, 9, 7)]]
