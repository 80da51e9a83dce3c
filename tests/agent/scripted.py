"""A scripted external agent: it reads an agent request and writes a Triton candidate for
the clamp-and-scale spec (``specs/clamp_scale.py``), doubling the parent's block size."""

from __future__ import annotations

import re

TEMPLATE = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _clamp_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.minimum(tl.maximum(x, -1.0), 1.0) * scale
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _clamp_scale[(triton.cdiv(n, BLOCK),)](x, out, n, self.scale, BLOCK=BLOCK)
        return out


BLOCK = {block}
'''


def answer(parent_source: str) -> str:
    """The candidate for a request: block 256 for a seed, twice the parent's otherwise."""
    m = re.search(r"^BLOCK = (\d+)$", parent_source, re.M)
    block = min(4096, int(m.group(1)) * 2) if m else 256
    return TEMPLATE.format(block=block)
