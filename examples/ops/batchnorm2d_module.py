"""BatchNorm2d module in training mode (batch statistics) followed by relu."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(x))


CHANNELS = 10


def get_inputs():
    return [torch.randn(6, CHANNELS, 9, 9)]


def get_init_inputs():
    return [CHANNELS]


def get_extra_inputs():
    return [[torch.randn(3, CHANNELS, 4, 5)]]
