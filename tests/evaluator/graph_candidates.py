"""Candidates that replay their forward as a CUDA graph, built around the emitted helpers
(``kernelevolve.graph_replay``), honest and not, for the relu_scale_add spec. Off CUDA
they take the eager path (``_graph_ok`` is false), on CUDA they capture and replay."""

from __future__ import annotations

from kernelevolve import graph_replay

HEADER = '''"""{doc}"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale_add(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.5 + b, mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)
'''

# _forward_eager bodies (method indentation)
HONEST = '''        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[(triton.cdiv(n, 1024),)](x, self.bias, y, n, x.shape[-1], BLOCK=1024)
        return y
'''
LIBRARY_COPY = '''        h = (torch.relu(x) * 2.5 + self.bias).contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _copy[(triton.cdiv(n, 1024),)](h, y, n, BLOCK=1024)
        return y
'''
DECOY = '''        x = x.contiguous()
        decoy = torch.empty_like(x)
        n = x.numel()
        _relu_scale_add[(triton.cdiv(n, 1024),)](x, self.bias, decoy, n, x.shape[-1], BLOCK=1024)
        return torch.relu(x) * 2.5 + self.bias
'''


def graph_candidate(doc: str, eager_body: str, helpers: str = graph_replay.HELPERS,
                    forward: list[str] | None = None) -> str:
    lines = [HEADER.format(doc=doc), helpers, "", "class ModelNew(nn.Module):",
             "    def __init__(self, features: int):", "        super().__init__()",
             "        self.bias = nn.Parameter(torch.randn(features))", ""]
    lines += forward if forward is not None else graph_replay.forward_lines("self, x", ["x"])
    lines += ["    def _forward_eager(self, x, bias=None):", eager_body]
    return "\n".join(lines)


# the replay without copying the call's inputs into the static buffers: every call returns
# the first call's answer (a result cached in graph memory)
STALE_HELPERS = graph_replay.HELPERS.replace(
    "        for dst, src in zip(static_inputs, args):\n            if isinstance(dst, torch.Tensor):\n"
    "                dst.copy_(src)\n", "")
# the runner launches the Triton kernel outside the capture and captures torch alone: its
# replays hold none of the candidate's kernels
TORCH_ONLY_RUNNER = graph_replay.HELPERS.replace(
    "    with torch.cuda.graph(cuda_graph):\n        outputs = fn(*static_inputs)\n",
    "    with torch.cuda.graph(cuda_graph):\n        outputs = torch.relu(static_inputs[0]) * 2.5 + static_inputs[1]\n")
TORCH_ONLY_FORWARD = [line.replace("replay(self._forward_eager, (x,))", "replay(self._forward_eager, (x, self.bias))")
                      for line in graph_replay.forward_lines("self, x", ["x"])]
