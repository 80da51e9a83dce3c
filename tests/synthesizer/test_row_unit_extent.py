"""Reductions whose reduced dims are all of extent 1 in the example inputs: the full and the
keepdim shape coincide there, and the pointwise chain after the reduction must still be one
value per row (fuzz case 10134 stored it at every column and overran a 13-element input)."""

from __future__ import annotations

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest
from tests.synthesizer.conftest import one_input_spec

CASES = {
    "std_then_chain": ("F.leaky_relu(x.std(dim=0, unbiased=False, keepdim=True), 0.2) * 3.0 + 1.0",
                       "torch.randn(1)", "torch.randn(13)"),
    "sum_rows_of_one": ("torch.relu(x.sum(0, keepdim=True)) * 2.0", "torch.randn(1, 6)", "torch.randn(5, 6)"),
    "amax_cols_of_one": ("torch.sigmoid(x.amax(1, keepdim=True)) + 1.0", "torch.randn(4, 1)", "torch.randn(4, 9)"),
    "mean_two_dims": ("torch.tanh(x.mean((0, 2), keepdim=True)) - 0.5", "torch.randn(1, 3, 1)",
                      "torch.randn(2, 3, 5)"),
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    synth = OfflineSynthesizer()
    jobs = []
    for name, (body, inputs, extra) in CASES.items():
        src = one_input_spec(name, [], body, inputs, extra)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        jobs.append({"id": name, "spec_source": src, "candidate_source": prop.source, "seeds": [1, 2]})
    return {r["id"]: r for r in run_in_subprocess(jobs)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_row_chain_after_a_unit_extent_reduction(name: str, results: dict[str, dict]) -> None:
    res = results[name]
    assert res["ok"], res
