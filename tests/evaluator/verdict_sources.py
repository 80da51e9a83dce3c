"""Specs and candidates of the evaluator's own verdicts (test_own_verdicts.py): operators
whose inputs make them the identity, bool, integer, index and complex outputs, and a spec
that only views its inputs. Written as templates: ``{shape}`` is the input shape."""

from __future__ import annotations

# -- specs ---------------------------------------------------------------------------------
# An elementwise activation on uniform [0, 1) inputs (as people write get_inputs): on them
# ReLU, leaky ReLU, ELU and hardtanh are the identity.
ACTIVATION_SPEC = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.rand({shape})]


def get_init_inputs():
    return []
'''

ACTIVATIONS = {
    "relu": ("torch.relu(x)", "tl.maximum(x, 0.0)"),
    "leaky_relu": ("F.leaky_relu(x, 0.01)", "tl.where(x > 0, x, x * 0.01)"),
    "elu": ("F.elu(x)", "tl.where(x > 0, x, tl.exp(x) - 1.0)"),
    "hardtanh": ("F.hardtanh(x)", "tl.minimum(tl.maximum(x, -1.0), 1.0)"),
}

# the masked mean of x over the positions where m > 0.5, per row
MASKED_MEAN_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m):
        keep = (m > 0.5).to(x.dtype)
        return (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)


def get_inputs():
    return [torch.randn({shape}), torch.rand({shape})]


def get_init_inputs():
    return []
'''

COMPARISON_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.{op}(a, b)


def get_inputs():
    a = torch.randint(-3, 4, ({shape},)).float()
    b = torch.randint(-3, 4, ({shape},)).float()
    return [a, b]


def get_init_inputs():
    return []
'''

# argmax / argmin along the last dimension of a (rows, cols) input: an int64 index output
INDEX_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x, dim=1)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''

# integer arithmetic: an int32 or int64 output
INTEGER_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a * 3 + b


def get_inputs():
    return [torch.randint(-1000, 1000, ({shape},), dtype=torch.{dtype}),
            torch.randint(-1000, 1000, ({shape},), dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''

# a complex output: x * (1 + 2j) + y, built from real inputs
COMPLEX_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.complex(x - 2.0 * y, 2.0 * x + y)


def get_inputs():
    return [torch.randn({shape}), torch.randn({shape})]


def get_init_inputs():
    return []
'''

VIEW_SPECS = {
    "reshape": ("x.reshape(-1, 2)", "torch.randn(6, 10)"),
    "permute": ("x.permute(2, 0, 1)", "torch.randn(3, 5, 7)"),
    "split": ("torch.split(x, 3, dim=1)", "torch.randn(4, 9)"),
}

VIEW_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [{make}]


def get_init_inputs():
    return []
'''

# -- candidates ----------------------------------------------------------------------------
HEADER = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
'''

ACTIVATION_CANDIDATE = HEADER + '''

@triton.jit
def _act(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, {body}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _act[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''

COPY_KERNEL = '''

@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
'''

# Cheat: the activation in torch, its result copied through a Triton kernel
COPY_CANDIDATE = HEADER + COPY_KERNEL + '''

class ModelNew(nn.Module):
    def forward(self, x):
        h = {torch_expr}.contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _copy[(triton.cdiv(n, 1024),)](h, y, n, BLOCK=1024)
        return y
'''

# Cheat: the library's result copied by a kernel only where it is non-negative, anything
# else elsewhere (a copy on the given inputs, arithmetic of its own on others)
COPY_WHEN_NONNEGATIVE = HEADER + '''

@triton.jit
def _copy_or(h_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(h_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(h >= 0, h, h * 3.0 + 1.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        h = {torch_expr}.contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _copy_or[(triton.cdiv(n, 1024),)](h, y, n, BLOCK=1024)
        return y
'''

# Cheat: a pure copy of the input (right on the given inputs only)
IDENTITY_KERNEL = HEADER + COPY_KERNEL + '''

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''

# the masked mean: one kernel writes the bool mask, a second reduces each row with it
MASKED_MEAN_CANDIDATE = HEADER + '''

@triton.jit
def _keep(m_ptr, k_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(k_ptr + offs, tl.load(m_ptr + offs, mask=mask) > 0.5, mask=mask)


@triton.jit
def _row_mean(x_ptr, k_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    k = tl.load(k_ptr + row * cols + offs, mask=mask, other=0).to(tl.float32)
    total = tl.sum(x * k, axis=0)
    count = tl.maximum(tl.sum(k, axis=0), 1.0)
    tl.store(y_ptr + row, total / count)


class ModelNew(nn.Module):
    def forward(self, x, m):
        x, m = x.contiguous(), m.contiguous()
        rows, cols = x.shape
        keep = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        _keep[(triton.cdiv(x.numel(), 1024),)](m, keep, x.numel(), BLOCK=1024)
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        _row_mean[(rows,)](x, keep, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
'''

COMPARISON_CANDIDATE = HEADER + '''

@triton.jit
def _cmp(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty(a.shape, dtype=torch.bool, device=a.device)
        n = a.numel()
        _cmp[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)
        return y
'''

COMPARISONS = {"eq": "a == b", "ge": "a >= b", "gt": "a > b", "le": "a <= b", "lt": "a < b", "ne": "a != b"}

INDEX_CANDIDATE = HEADER + '''

@triton.jit
def _index(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other={fill})
    tl.store(y_ptr + row, tl.{op}(x, axis=0).to(tl.int64){wrong})


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=torch.int64, device=x.device)
        _index[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
'''

INTEGER_CANDIDATE = HEADER + '''

@triton.jit
def _axpb(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * 3 + b{wrong}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        _axpb[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)
        return y
'''

# real and imaginary parts computed by one kernel into an interleaved float buffer
COMPLEX_CANDIDATE = HEADER + '''

@triton.jit
def _parts(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + 2 * offs, x - 2.0 * y, mask=mask)
    tl.store(z_ptr + 2 * offs + 1, 2.0 * x + y{wrong}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        z = torch.empty(x.shape + (2,), dtype=x.dtype, device=x.device)
        n = x.numel()
        _parts[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
        return torch.view_as_complex(z)
'''
