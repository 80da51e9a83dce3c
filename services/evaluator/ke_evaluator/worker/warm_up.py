"""One-time costs of a worker process, paid at start-up instead of inside a job.

A spare worker starts in the background, so whatever it does before saying "ready" is off
the critical path; whatever the first job of a process does once is not. Measured in-job
on an H100 (bench/RESULTS.md): the first ``FlopCounterMode`` took 3.2 s (most of it the
Dynamo/Inductor import that ``diagnosis.count_flops`` now avoids), and the first Triton
compile of a process loads the compiler stack (about a second) on top of the kernel's own
compile. Worker side: torch and triton only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backends import DeviceBackend, for_torch_device
from . import diagnosis


@triton.jit
def _warm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def warm_host() -> list[str]:
    """Host-only one-time paths (no device lock needed); returns what was warmed."""
    a = torch.randn(16, 16)
    diagnosis.count_flops(lambda: a @ a)  # imports and registers the flop counter's tables
    return ["flop counter"]


def warm_device(device: torch.device, backend: DeviceBackend | None = None) -> list[str]:
    """The first Triton compile and launch on a GPU; the caller holds the device lock SHARED
    (the compile itself releases it, see compile_release.py). Returns what was warmed."""
    backend = backend if backend is not None else for_torch_device(device)
    if not backend.accelerated:
        return []
    x = torch.zeros(64, device=device)
    _warm_kernel[(1,)](x, x.numel(), BLOCK=64)
    backend.synchronize()
    return ["triton compile + launch"]
