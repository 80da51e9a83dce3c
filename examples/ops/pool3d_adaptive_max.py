"""3-D pooling for video features: MaxPool3d with ceil_mode, then an adaptive max pool to (2, 3, 3) and a shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), ceil_mode=True)

    def forward(self, x):
        return F.adaptive_max_pool3d(self.pool(x), (2, 3, 3)) - 0.25


def get_inputs():
    return [torch.randn(2, 3, 5, 13, 12)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 4, 7, 9)]]
