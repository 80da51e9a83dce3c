"""Style: __init__(self, in_features, out_features, *args, **kwargs) with keyword defaults read from kwargs."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, *args, **kwargs):
        super(Model, self).__init__()
        bias = kwargs.get("bias", True)
        self.negative_slope = kwargs.get("negative_slope", 0.2)
        self.fc = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return nn.functional.leaky_relu(self.fc(x), self.negative_slope)


def get_inputs():
    return [torch.randn(8, 48)]


def get_init_inputs():
    return [48, 64]
