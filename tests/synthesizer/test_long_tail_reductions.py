"""Reductions and scans of the long tail (plan/lower_reduction.py): any / all, the
NaN-skipping sum and mean, softmin, logcumsumexp, the unbiased positional var and the
-inf norm lower to Triton row kernels and match torch on odd shapes, NaN-holding rows
included; logcumsumexp also in every row strategy the search can pick."""

from __future__ import annotations

import pytest
import torch

from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest
from tests.synthesizer.conftest import candidate_and_reference, triton_seed

SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    x = torch.randn({shape})
    x[0, 0] = float("nan")
    x[-1, -1] = 0.0
    return [x]


def get_init_inputs():
    return []
'''

BODIES = ["torch.nansum(x, dim=1)", "torch.nanmean(x, dim=-1, keepdim=True)", "torch.nansum(x)",
          "torch.any(x > 1.5, dim=1)", "torch.all(x.abs() < 3.0, dim=0)", "torch.any(x)",
          "torch.nn.functional.softmin(x.nan_to_num(), dim=1)", "torch.logcumsumexp(x.nan_to_num(), 1)",
          "torch.logcumsumexp(x.nan_to_num(), dim=0)", "torch.var(x.nan_to_num(), True)",
          "torch.norm(x.nan_to_num(), float('-inf'))"]


def _check(src: str, candidate: str) -> None:
    got, want = candidate_and_reference(src, candidate)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("shape", ["7, 33", "3, 1000", "1, 5"])
@pytest.mark.parametrize("body", BODIES)
def test_long_tail_reductions_lower_and_match(body: str, shape: str) -> None:
    src = SPEC.format(body=body, shape=shape)
    _check(src, triton_seed(src, "tail").source)


def test_logcumsumexp_in_every_row_strategy() -> None:
    src = SPEC.format(body="torch.logcumsumexp(x.nan_to_num(), 1)", shape="5, 3000")
    synth = OfflineSynthesizer()
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name="lcse", count=1))
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    children = synth.propose(ProposalRequest(spec_source=src, spec_name="lcse", count=100, parent=parent))
    strategies = {c.genome.get("g0.strategy") for c in children} - {None}
    assert strategies, "no row strategy variant proposed"
    for child in [seed, *children]:
        _check(src, child.source)


@pytest.mark.parametrize("shape", ["7, 33", "3, 1000", "1, 5", "1, 1"])
@pytest.mark.parametrize("body", ["torch.count_nonzero(x)", "torch.count_nonzero(x, 1)",
                                  "torch.count_nonzero(x, dim=0)", "torch.count_nonzero(x, (0, 1))"])
def test_count_nonzero_counts_in_a_triton_kernel(body: str, shape: str) -> None:
    """int64 counts from the row kernel's fp32 accumulator (it was a library call): NaN and
    inf count, -0.0 does not, as torch's."""
    src = SPEC.format(body=body, shape=shape).replace(
        '    x[-1, -1] = 0.0\n', '    x[-1, -1] = 0.0\n    x[0, -1] = -0.0\n    x[-1, 0] = float("inf")\n'
        '    x[:, 1::3] = 0.0\n')
    got, want = candidate_and_reference(src, triton_seed(src, "cnz").source)
    assert got.dtype == want.dtype == torch.int64 and got.shape == want.shape
    assert torch.equal(got, want), (got, want)


def test_count_nonzero_past_fp32_exact_counts_stays_with_the_library() -> None:
    """A row of more than 2^24 elements would round its fp32 count: not lowered."""
    import torch.fx

    from ke_synthesizer.offline.frontend.ops import NormOp
    from ke_synthesizer.offline.plan import lower_reduction

    g = torch.fx.Graph()
    x = g.placeholder("x")
    node = g.call_function(torch.count_nonzero, (x, 1))
    for n, shape in ((x, (2, (1 << 24) + 1)), (node, (2,))):
        n.meta["tensor_meta"] = torch.fx.passes.shape_prop.TensorMetadata(
            torch.Size(shape), torch.float32 if n is x else torch.int64, False, (1,), torch.contiguous_format,
            False, {})
    op = NormOp("count_nonzero", {"input": x, "dim": 1})
    assert lower_reduction.row_info(node, op, lambda p: ()) is None
    x.meta["tensor_meta"] = x.meta["tensor_meta"]._replace(shape=torch.Size((2, 1 << 24)))
    assert lower_reduction.row_info(node, op, lambda p: ()) is not None


MASKED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m):
        return {body}


def get_inputs():
    return [torch.randn({shape}), torch.rand({shape}) > 0.4]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("shape", ["7, 33", "3, 1000", "1, 5"])
@pytest.mark.parametrize("body", ["torch.masked.sum(x, 1, mask=m)", "torch.masked.sum(x, mask=None)",
                                  "torch.masked.cumsum(x, 1, mask=m)", "torch.masked.cumprod(x, 0, mask=m)",
                                  "torch.masked.logsumexp(x, 1, mask=m)", "torch.masked.argmax(x, 1, mask=m)",
                                  "torch.masked.argmin(x, 0, mask=m)", "torch.argmax(x, 1).float() * 0.5"])
def test_masked_reductions_and_scans_lower_to_triton(body: str, shape: str) -> None:
    """torch.masked's sum and scans pass dtype= the input's own and make scalar constants in
    forward: the dispatcher-level capture refused both (the whole forward was a library call);
    its logsumexp / argmax reached the dispatcher as ops it did not map, and argmax's index
    converted to fp32 (its input's dtype) was a library cast."""
    src = MASKED.format(body=body, shape=shape)
    _check(src, triton_seed(src, "masked").source)
