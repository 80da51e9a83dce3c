"""A spec and a candidate at tens of MB for the harness's memory tests: a pointwise op over
one input of a given shape and dtype (the output is the input's size), and a correct
Triton candidate for it with large blocks (few programs, so the CPU interpreter is quick)."""

from __future__ import annotations

SPEC = '''
import torch
import torch.nn as nn

SHAPE = {shape!r}
DTYPE = torch.{dtype}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.to(torch.promote_types(x.dtype, torch.float32))  # float64 stays float64
        return (y * torch.sigmoid(y) * 1.5 + 0.25).to(x.dtype)


def get_inputs():
    return [torch.randn(SHAPE).to(DTYPE)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.sigmoid(x) * 1.5 + 0.25
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 1 << 18 if x.device.type == "cpu" else 1024  # few programs in the interpreter
        _silu_affine[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
        return y
'''


def spec(shape: tuple[int, ...], dtype: str) -> str:
    return SPEC.format(shape=tuple(shape), dtype=dtype)
