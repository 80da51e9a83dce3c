"""Style: a boolean keep-mask input used directly by masked_fill (no inversion), then a scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale=2.0):
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, x, drop):
        return x.masked_fill(drop, 0.0) * self.scale


def get_inputs():
    return [torch.randn(8, 128), torch.rand(8, 128) < 0.25]


def get_init_inputs():
    return [2.0]
