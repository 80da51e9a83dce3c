"""Incorrect: softmax without the max subtraction, copying eager's overflow NaN (test spec softmax_overflow)."""

# It overflows where eager does and returns eager's NaN where the float64 value is 1.0.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_naive(x_ptr, y_ptr, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        rows = 64
        block = triton.next_power_of_2(n_cols)
        _softmax_rows_naive[(triton.cdiv(n_rows, rows),)](x2, y, n_rows, n_cols, x2.stride(0), ROWS=rows,
                                                          BLOCK=block)
        return y.view(x.shape)
