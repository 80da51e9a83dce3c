"""A reference that only moves data (flip, roll, cat, a pad, ...) is computed by kernels
that only move data: the arithmetic audit accepts them when the values they copy are the
forward's own inputs (``worker/data_movement.py``), and still rejects a library result
copied through a Triton kernel. Before, every such candidate was rejected with "its Triton
kernels only move data; the arithmetic runs in library calls"."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge

SPEC = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""

# A Triton kernel that gathers x at an index computed from the output position: flip of
# dim 1 (rows of length N) when FLIP, else a plain copy of SRC (the tensor given).
CANDIDATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def move(src, dst, n_rows, N, BLOCK: tl.constexpr, FLIP: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_rows * N
    row = offs // N
    col = offs % N
    if FLIP:
        col = N - 1 - col
    v = tl.load(src + row * N + col, mask=mask)
    tl.store(dst + offs, v, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        src = {source}
        src = src.contiguous()
        out = torch.empty_like(src)
        n = src.numel()
        N = src.shape[-1]
        move[(triton.cdiv(n, 256),)](src, out, n // N, N, BLOCK=256, FLIP={flip})
        return out
"""

SHAPES = ["7, 33", "1, 5", "64, 1000"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_flip_in_a_triton_kernel_is_the_operator(judge: Judge, shape: str) -> None:
    v = judge.evaluate(SPEC.format(expr="torch.flip(x, dims=(1,))", shape=shape),
                       CANDIDATE.format(source="x", flip=True), candidate_id="flip")
    assert v.status == "correct", v.reason
    assert "flip" in v.evidence["kernel_arithmetic"]["data_movement"]


def test_a_library_flip_copied_through_a_kernel_stays_rejected(judge: Judge) -> None:
    # torch.flip does the work; the kernel copies its result: a disguised fallback
    v = judge.evaluate(SPEC.format(expr="torch.flip(x, dims=(1,))", shape="7, 33"),
                       CANDIDATE.format(source="torch.flip(x, dims=(1,))", flip=False), candidate_id="copy")
    assert v.status == "rejected", v.reason
    assert "only move data" in v.reason


def test_a_copy_kernel_for_arithmetic_stays_rejected(judge: Judge) -> None:
    # the reference computes (exp); the library computes it and the kernel copies it
    v = judge.evaluate(SPEC.format(expr="torch.exp(x)", shape="7, 33"),
                       CANDIDATE.format(source="torch.exp(x)", flip=False), candidate_id="exp_copy")
    assert v.status == "rejected", v.reason
    assert "only move data" in v.reason and "data_movement" not in v.evidence.get("kernel_arithmetic", {})


SYNTHESIZED = {
    # a gather whose index is wrapped by the reference (remainder on indices, not on values)
    "take_along_dim": ("torch.take_along_dim(x, torch.tensor([[1], [0], [2]]).expand(3, 4).remainder(5), dim=1)",
                       "3, 5"),
    "embedding": ("torch.nn.functional.embedding(torch.tensor([3, 0, 3, 6]), x)", "7, 4"),
    # the identity on every real for a threshold of 0: a kernel moving x is the operator
    "hardshrink_0": ("torch.nn.functional.hardshrink(x, 0.0)", "5, 5"),
    # the identity on finite inputs: judged where NaN and infinities are among them
    "nan_to_num": ("torch.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-2.0)", "4, 5"),
}


@pytest.mark.parametrize("name", sorted(SYNTHESIZED))
def test_the_offline_seed_of_an_operator_that_moves_data_is_correct(judge: Judge, name: str) -> None:
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    expr, shape = SYNTHESIZED[name]
    spec = SPEC.format(expr=expr, shape=shape)
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name=name, count=1))
    assert not seed.fallback_nodes, seed.fallback_nodes
    v = judge.evaluate(spec, seed.source, candidate_id=name)
    assert v.status == "correct", v.reason
