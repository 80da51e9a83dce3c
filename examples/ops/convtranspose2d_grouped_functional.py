"""Hand-rolled upsampler: grouped, dilated F.conv_transpose2d with a bias parameter, then tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, channels // groups, 3, 3) * 0.1)
        self.bias = nn.Parameter(torch.zeros(channels))
        self.groups = groups

    def forward(self, x):
        y = F.conv_transpose2d(x, self.weight, self.bias, stride=2, padding=2, output_padding=1,
                               groups=self.groups, dilation=2)
        return torch.tanh(y)


def get_inputs():
    return [torch.randn(2, 12, 11, 9)]


def get_init_inputs():
    return [12, 3]


def get_extra_inputs():
    return [[torch.randn(1, 12, 5, 7)]]
