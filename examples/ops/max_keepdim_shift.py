"""Reduction epilogue: x - max(x, dim=-1, keepdim=True).values, then exp."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x - torch.max(x, dim=-1, keepdim=True).values)


def get_inputs():
    return [torch.randn(70, 333)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 12)]]
