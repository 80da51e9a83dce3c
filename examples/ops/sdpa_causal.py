"""Causal scaled dot product attention via F.scaled_dot_product_attention."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(2, 4, 32, 16), torch.randn(2, 4, 32, 16), torch.randn(2, 4, 32, 16)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16)]]
