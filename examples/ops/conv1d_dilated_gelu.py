"""Conv1d (stride 2, padding 2, dilation 2) followed by gelu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(6, 10, kernel_size=5, stride=2, padding=2, dilation=2)

    def forward(self, x):
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(4, 6, 80)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 6, 17)]]
