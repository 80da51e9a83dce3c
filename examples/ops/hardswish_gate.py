"""Pointwise: hardswish(x) * hardsigmoid(y) over two same-shaped tensors."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return F.hardswish(x) * F.hardsigmoid(y)


def get_inputs():
    return [torch.randn(24, 600) * 4, torch.randn(24, 600) * 4]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 77) * 4, torch.randn(5, 77) * 4]]
