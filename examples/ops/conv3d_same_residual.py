"""Video block: Conv3d(padding='same') -> ReLU (nn.Sequential) plus the input (residual)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(nn.Conv3d(channels, channels, (3, 3, 3), padding="same"), nn.ReLU())

    def forward(self, x):
        return self.body(x) + x


def get_inputs():
    return [torch.randn(2, 6, 5, 9, 7)]


def get_init_inputs():
    return [6]


def get_extra_inputs():
    return [[torch.randn(1, 6, 3, 4, 11)]]
