"""Grouped conv2d in half precision (fp16 weights and input) with SiLU; fp32 accumulation."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KE_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, groups=2).half()

    def forward(self, x):
        return F.silu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 8, 11, 10).half()]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 8, 5, 7).half()]]
