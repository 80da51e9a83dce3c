"""Broken: a Triton load far out of bounds (segfaults the interpreter / faults on GPU)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bad_load(x_ptr, y_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) + far
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + offs))


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        y = torch.empty_like(x)
        _bad_load[(1,)](x, y, 1 << 40, BLOCK=16)
        return y
