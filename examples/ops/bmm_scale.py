"""Batched matmul with a scaling epilogue: bmm(a, b) * 0.125."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b) * 0.125


def get_inputs():
    return [torch.randn(4, 48, 64), torch.randn(4, 64, 40)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 9, 19), torch.randn(3, 19, 7)]]
