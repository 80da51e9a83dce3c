"""Correct but not bitwise deterministic: adds noise far below the tolerance (judged correct, with a warning)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.5 + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        # its own generator: every forward call starts from one global generator state
        self.noise = torch.Generator()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[(triton.cdiv(n, 16384),)](x, self.bias, y, n, x.shape[-1], BLOCK=16384)
        return y + torch.rand(y.shape, generator=self.noise).to(y.device) * 1e-6
