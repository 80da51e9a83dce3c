"""Loss: hinge mean(clamp(1 - pred * target, min=0))."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return torch.clamp(1.0 - pred * target, min=0.0).mean()


def get_inputs():
    return [torch.randn(128, 64), torch.sign(torch.randn(128, 64))]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 3), torch.sign(torch.randn(5, 3))]]
