"""MobileNet-style block: depthwise 3x3 (stride 2) -> BatchNorm -> ReLU6 -> pointwise 1x1 -> hardswish."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.dw = nn.Sequential(
            nn.Conv2d(cin, cin, 3, stride=2, padding=1, groups=cin, bias=False),
            nn.BatchNorm2d(cin),
            nn.ReLU6(),
        )
        self.pw = nn.Conv2d(cin, cout, 1)
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(self.pw(self.dw(x)))


def get_inputs():
    return [torch.randn(2, 16, 15, 13)]


def get_init_inputs():
    return [16, 24]


def get_extra_inputs():
    return [[torch.randn(1, 16, 7, 8)]]
