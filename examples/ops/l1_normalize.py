"""Reduction epilogue: x / sum(|x|) over the last dim (keepdim)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.sum(torch.abs(x), dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(80, 300)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(6, 11)]]
