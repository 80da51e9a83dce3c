"""Fuzz case 10134 failed: mismatch: [{'kind': 'extra', 'seed': 0, 'ok': False, 'max_abs_error': inf}]

Generated case fuzz_10134: unary -> unary -> binary -> std_keep -> unary -> unary (float32).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        t1 = F.relu6(x * 3.0)
        t2 = t1 + 1.25
        t3 = torch.maximum(x, t2)
        t4 = t3.std(dim=0, unbiased=False, keepdim=True)
        t5 = F.leaky_relu(t4, 0.2)
        t6 = torch.where(t5 > 0, t5, 0.1 * t5)
        return t6


def get_inputs():
    return [torch.randn(1)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [
        [torch.randn(13)],
    ]
