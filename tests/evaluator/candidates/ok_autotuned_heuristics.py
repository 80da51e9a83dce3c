"""Correct: the kernel behind @triton.autotune and @triton.heuristics (launches counted through wrappers)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 8192}), triton.Config({"BLOCK": 16384})], key=["n_elements"])
@triton.heuristics({"EVEN": lambda args: args["n_elements"] % args["BLOCK"] == 0})
@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        b = tl.load(b_ptr + offs % n_cols)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.5 + b)
    else:
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.5 + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, self.bias, y, n, x.shape[-1])
        return y
