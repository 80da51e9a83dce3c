"""Polar angle and radius of 2-D points plus a sawtooth and a staircase of the raw coordinates."""

# Polar angle and radius of 2-D points plus a sawtooth and a staircase of the raw
# coordinates: atan2, hypot, log10, remainder (the divisor's sign) and floor_divide in one
# pointwise chain. The discontinuous ops see the inputs themselves (exact in fp32), so a
# rounding difference upstream cannot move a value across a step.

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, period: float):
        super().__init__()
        self.period = period

    def forward(self, x, y):
        angle = torch.atan2(y, x)
        radius = torch.hypot(x, y)
        saw = torch.remainder(x, self.period)
        stairs = torch.floor_divide(y, 0.25)
        return angle + torch.log10(1.0 + radius) + saw * stairs


def get_inputs():
    return [torch.randn(16, 1000), torch.randn(16, 1000)]


def get_init_inputs():
    return [-1.5]


def get_extra_inputs():
    return [[torch.randn(3, 7), torch.randn(3, 7)]]
