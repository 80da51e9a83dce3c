"""Cross attention via SDPA: 24 queries over 40 keys, value width 48, explicit scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=0.2)


def get_inputs():
    return [torch.randn(2, 3, 24, 32), torch.randn(2, 3, 40, 32), torch.randn(2, 3, 40, 48)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 5, 32), torch.randn(1, 2, 11, 32), torch.randn(1, 2, 11, 48)]]
