"""Einsum: a 4-D tensor times a matrix over its last dim, ``bijl,lk->bijk``."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.einsum("bijl,lk->bijk", x, w)


def get_inputs():
    return [torch.randn(2, 5, 7, 24), torch.randn(24, 19)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 1, 9), torch.randn(9, 33)]]
