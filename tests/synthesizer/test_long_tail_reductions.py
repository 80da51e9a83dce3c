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
