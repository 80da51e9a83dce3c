"""Cheat: computes in float16 inside the kernel and casts back (passes a loose tolerance, not the error budget)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_fp16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float16)
    y = x * 3.0 + 1.0
    tl.store(y_ptr + offs, y.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _affine_fp16[(triton.cdiv(x.numel(), 16384),)](x, y, x.numel(), BLOCK=16384)
        return y
