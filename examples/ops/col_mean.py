"""Reduction: mean over dim 0 (columns) of a matrix."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=0)


def get_inputs():
    return [torch.randn(300, 120)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(41, 13)]]
