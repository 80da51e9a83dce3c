"""Correct (legitimate partial fallback): torch.matmul for the product, a Triton kernel for the epilogue."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_relu_half(h_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    h = tl.load(h_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(h + b, 0.0) * 0.5, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.matmul(x, self.linear.weight.t()).contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _bias_relu_half[(triton.cdiv(n, 16384),)](h, self.linear.bias, y, n, h.shape[-1], BLOCK=16384)
        return y
