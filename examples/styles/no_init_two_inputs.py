"""Style: a Model with no __init__ and a docstring-only body above forward, a*sigmoid(b) + b."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Gated sum of two tensors of the same shape."""

    def forward(self, a, b):
        return a * torch.sigmoid(b) + b


def get_inputs():
    return [torch.randn(4, 64, 32), torch.randn(4, 64, 32)]


def get_init_inputs():
    return []
