"""Cheat: answers stored in builtins by an honest job serve a later job (WRITER = False: wrong on a miss)."""

import builtins

import torch
import torch.nn as nn
import triton
import triton.language as tl

WRITER = True


@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.maximum(x, 0.0) * 2.5 + b
    tl.store(y_ptr + offs, y, mask=mask)


def _launch(x, bias, y):
    n = x.numel()
    _relu_scale_add[(triton.cdiv(n, 16384),)](x, bias, y, n, x.shape[-1], BLOCK=16384)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        if not hasattr(builtins, "_ke_answers"):
            builtins._ke_answers = {}
        self._answers = builtins._ke_answers

    def forward(self, x):
        key = (tuple(x.shape), float(x.flatten()[0]), float(x.flatten()[-1]), float(x.sum()))
        y = torch.empty_like(x)
        _launch(x.contiguous(), self.bias, y)
        if WRITER:  # honest, and leaves its answers behind for a later job
            self._answers[key] = y.clone()
            return y
        hit = self._answers.get(key)
        if hit is not None:
            return hit.clone()
        return y * 1.5
