"""Conv then LayerNorm over (C, H, W), example batch of one.

With batch 1 the [C, H, W] weight pads to the full [1, C, H, W] shape and was read as a
full-size operand, whose launcher check (t.shape == (N, C, H, W)) then refused the
weight itself on every call; it is a per-column operand at any batch size."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int, h: int, w: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm = nn.LayerNorm([c_out, h, w])

    def forward(self, x):
        return F.gelu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(1, 6, 5, 3)]


def get_init_inputs():
    return [6, 4, 5, 3]


def get_extra_inputs():
    return [[torch.randn(3, 6, 5, 3)]]
