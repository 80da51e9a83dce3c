"""Style: tuple constructor arguments (kernel_size=(3, 3), padding=(1, 1)) passed through get_init_inputs."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=(3, 3), padding=(1, 1)):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, padding=padding)

    def forward(self, x):
        return torch.sigmoid(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return [4, 8, (3, 3), (1, 1)]


def get_extra_inputs():
    return [[torch.randn(1, 4, 7, 10)]]
