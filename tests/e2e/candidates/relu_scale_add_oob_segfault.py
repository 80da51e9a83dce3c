"""Candidate whose Triton kernel reads 2**40 elements past its input, unmasked: the worker segfaults."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def far_out_of_bounds_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + 1099511627776)  # unmasked, 2**40 elements past the end
    tl.store(out_ptr + offs, x, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = triton.next_power_of_2(n)
        far_out_of_bounds_kernel[(1,)](x, out, n, BLOCK=block)
        return out
