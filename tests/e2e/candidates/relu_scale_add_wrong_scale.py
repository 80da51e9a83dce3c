"""Handwritten candidate for examples/ops/relu_scale_add.py that scales by 2.4 instead of 2.5."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_scale_bias_kernel(x_ptr, b_ptr, out_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % features, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * 2.4 + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = min(8192, triton.next_power_of_2(n))
        relu_scale_bias_kernel[(triton.cdiv(n, block),)](x, self.bias, out, n, x.shape[-1], BLOCK=block)
        return out
