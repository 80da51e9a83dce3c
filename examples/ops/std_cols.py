"""Reduction: population standard deviation over dim 0, keepdim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.std(x, dim=0, unbiased=False, keepdim=True)


def get_inputs():
    return [torch.randn(200, 64)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(31, 9)]]
