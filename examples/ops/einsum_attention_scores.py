"""Matmul: attention scores with einsum over a [batch, seq, heads, dim] layout."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k):
        scale = 1.0 / math.sqrt(q.size(-1))
        return torch.einsum("bqhd,bkhd->bhqk", q, k) * scale


def get_inputs():
    return [torch.randn(2, 40, 4, 32), torch.randn(2, 56, 4, 32)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 2, 5), torch.randn(1, 7, 2, 5)]]
