"""Broken: forges phase messages in the worker's result pipe to lengthen its own limit."""

# Runtime-only judge (the static policy bans sys and os). Right on its first call; on later
# calls it writes a measured reference cost of a million seconds per call and a new run
# phase, again and again while it spins, then answers right. Honoured, they would restart
# its clock for as long as it likes or lengthen its limit; the parent lets phases move
# forward only and takes a cost only where the measure phase ends, before any candidate
# is loaded.

import json
import os
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.maximum(x, 0.0) * 2.5 + b
    tl.store(y_ptr + offs, y, mask=mask)


_COST = {"eager_s": 1e6, "float64_s": 1e6, "inputs_s": 0.0, "build_s": 0.0, "extra_sets": 0}


def _forge() -> None:
    fd = int(sys.argv[sys.argv.index("--result-fd") + 1])
    for msg in ({"type": "phase", "phase": "measure"},
                {"type": "phase", "phase": "compile", "reference_cost": _COST},
                {"type": "phase", "phase": "run"}):
        os.write(fd, (json.dumps(msg) + "\n").encode())


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[(triton.cdiv(n, 16384),)](x, self.bias, y, n, x.shape[-1], BLOCK=16384)
        self.calls += 1
        if self.calls > 1:
            for _ in range(200):  # tens of seconds of forged phase restarts
                _forge()
                spins = 0
                while spins < 2 * 10**6:
                    spins += 1
        return y
