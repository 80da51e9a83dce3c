"""Pooling options: ceil_mode max / avg pools, a dilated max pool and an adaptive 4x4 average pool."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.head = nn.AdaptiveAvgPool2d((4, 4))

    def forward(self, x):
        a = torch.relu(self.pool(x))
        b = F.max_pool2d(x, 2, stride=1, padding=1, dilation=2) * 0.5
        c = F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        return a, b, c + 1.0, self.head(x)


def get_inputs():
    return [torch.randn(2, 4, 17, 14)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 4, 9, 11)]]
