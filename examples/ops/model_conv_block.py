"""Conv block: Conv2d -> BatchNorm2d (training stats) -> ReLU -> MaxPool2d."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return [3, 8]


def get_extra_inputs():
    return [[torch.randn(2, 3, 10, 6)]]
