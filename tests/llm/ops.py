"""The operator these tests optimize, and scripted candidate modules for it."""

from __future__ import annotations

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x) * alpha + 1 over an odd-shaped matrix."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.relu(x) * self.alpha + 1.0


def get_inputs():
    return [torch.randn(37, 53)]


def get_init_inputs():
    return [0.5]
'''

_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def _affine_relu(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = BODY
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _affine_relu[(triton.cdiv(n, 1024),)](x, y, n, self.alpha, BLOCK=1024)
        return y
'''

CORRECT = _KERNEL.replace("BODY", "tl.maximum(x, 0.0) * alpha + 1.0")
# Runs but computes the wrong thing: the evaluator says "incorrect".
INCORRECT = _KERNEL.replace("BODY", "tl.maximum(x, 0.0) * alpha + 2.0")
# Does not compile: an unknown Triton function.
BROKEN = _KERNEL.replace("BODY", "tl.maximmum(x, 0.0) * alpha + 1.0")


def fenced(source: str, chatter: str = "Here is the kernel.") -> str:
    return f"{chatter}\n\n```python\n{source}```\n"
