"""Contract of the offline synthesizer: seeds, children along transformation edges,
determinism, exhaustion, fallbacks and spec errors."""

from __future__ import annotations

import pytest
import torch

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest, Transformation

from .conftest import example_source

FLIP_SPEC = '''"""Unlowered op between lowered ones."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(torch.flip(torch.sigmoid(x) * 2.0, dims=[0])) + 1.0


def get_inputs():
    return [torch.randn(16, 40)]


def get_init_inputs():
    return []
'''


def _request(name: str, **kw) -> ProposalRequest:
    return ProposalRequest(spec_source=example_source(name), spec_name=name, **kw)


def test_seed_proposals_are_deterministic_and_distinct(synth: OfflineSynthesizer) -> None:
    a = synth.propose(_request("relu_scale_add", count=3))
    b = OfflineSynthesizer().propose(_request("relu_scale_add", count=3))
    assert [p.source for p in a] == [p.source for p in b]
    assert a[0].transformation == Transformation("seed", {"variant": "default"})
    assert len({tuple(sorted(p.genome.items())) for p in a}) == len(a) == 3


def test_children_apply_one_untried_edge_and_are_correct(synth: OfflineSynthesizer) -> None:
    name = "gelu_tanh_chain"
    (seed,) = synth.propose(_request(name, count=1))
    parent = ParentInfo("c0", seed.source, seed.transformation, dict(seed.genome))
    first = synth.propose(_request(name, count=2, parent=parent))
    tried = tuple(p.transformation for p in first)
    second = synth.propose(_request(name, count=2, parent=parent, tried=tried))
    children = first + second
    assert len(children) == 4
    for child in children:
        assert child.genome != seed.genome
        changed = [k for k in child.genome if child.genome[k] != seed.genome.get(k)]
        assert child.transformation.params["value"] in {child.genome[k] for k in changed}
    def edge(t: Transformation) -> tuple[str, tuple[tuple[str, str], ...]]:
        return t.name, tuple(sorted(t.params.items()))

    assert not {edge(t) for t in tried} & {edge(p.transformation) for p in second}
    jobs = [{"id": str(i), "spec_source": example_source(name), "candidate_source": c.source, "extra": False,
             "seeds": [3]} for i, c in enumerate(children)]
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results


def test_space_is_exhausted_when_every_edge_was_tried(synth: OfflineSynthesizer) -> None:
    name = "relu_scale_add"
    (seed,) = synth.propose(_request(name, count=1))
    parent = ParentInfo("c0", seed.source, seed.transformation, dict(seed.genome))
    everything = synth.propose(_request(name, count=1000, parent=parent))
    space = synth.space(example_source(name), name)
    assert len(everything) == sum(len(choices) - 1 for _, choices in space)
    rest = synth.propose(_request(name, count=5, parent=parent, tried=tuple(p.transformation for p in everything)))
    assert rest == []


def test_unlowerable_op_falls_back_and_rest_stays_triton(synth: OfflineSynthesizer) -> None:
    # sort has no Triton lowering yet (flip, which this test used, is an index-family kernel now)
    src = FLIP_SPEC.replace("torch.flip(torch.sigmoid(x) * 2.0, dims=[0])",
                            "torch.sort(torch.sigmoid(x) * 2.0, dim=0)[0]")
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="sort", count=1))
    assert prop.fallback_nodes == ("sort",)
    assert prop.source.count("@triton.jit") == 2
    (result,) = run_in_subprocess([{"id": "sort", "spec_source": src, "candidate_source": prop.source}])
    assert result["ok"], result


def test_broken_spec_raises_invalid_spec(synth: OfflineSynthesizer) -> None:
    with pytest.raises(InvalidSpecError):
        synth.propose(ProposalRequest(spec_source="import torch\nclass Model: pass\n", spec_name="bad"))
    with pytest.raises(InvalidSpecError):
        synth.propose(ProposalRequest(spec_source="this is not python", spec_name="bad2"))


def test_proposing_leaves_the_global_rng_alone(synth: OfflineSynthesizer) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    OfflineSynthesizer().propose(_request("layernorm", count=1))
    assert torch.equal(torch.rand(3), expected)


def test_redundant_casts_do_not_block_fusion(synth: OfflineSynthesizer) -> None:
    flip = "torch.flip(torch.sigmoid(x) * 2.0, dims=[0])"
    src = FLIP_SPEC.replace(flip, "(torch.sigmoid(x.float()) * 2.0).to(x.dtype)")
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="casts", count=1))
    assert prop.fallback_nodes == ()
    assert prop.source.count("@triton.jit") == 1
    (result,) = run_in_subprocess([{"id": "casts", "spec_source": src, "candidate_source": prop.source}])
    assert result["ok"], result
