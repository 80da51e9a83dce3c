"""Batched matmul over two leading dims: [2, 3, M, K] @ [2, 3, K, N]."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(2, 3, 32, 48), torch.randn(2, 3, 48, 24)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 7, 5), torch.randn(1, 2, 5, 9)]]
