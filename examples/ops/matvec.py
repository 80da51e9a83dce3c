"""Matrix-vector product [M, K] @ [K] followed by sigmoid."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, v):
        return torch.sigmoid(torch.matmul(a, v))


def get_inputs():
    return [torch.randn(200, 96), torch.randn(96)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(17, 33), torch.randn(33)]]
