"""Broken: right on its first call (compile phase), then busy for hours on every later one."""

# A run-phase timeout however slow the reference is: its own time never lengthens its limit.
# Runtime-only judge: the static policy rejects the call counter (state written in forward).

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.maximum(x, 0.0) * 2.5 + b
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[(triton.cdiv(n, 16384),)](x, self.bias, y, n, x.shape[-1], BLOCK=16384)
        self.calls += 1
        spins = 0
        while self.calls > 1 and spins < 10**12:
            spins += 1
        return y
