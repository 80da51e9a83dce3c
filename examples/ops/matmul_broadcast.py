"""Matmul of a batch [B, M, K] by a shared matrix [K, N], plus relu."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(3, 40, 64), torch.randn(64, 72)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 5, 64), torch.randn(64, 72)]]
