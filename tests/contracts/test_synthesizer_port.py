"""One contract suite for the synthesizer port (``kernelevolve.ports.synthesis``), run
against every implementation: the offline compiler and the test double."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import CandidateSynthesizer, ParentInfo, ProposalRequest, Transformation
from tests.unit.fakes import FakeSynthesizer

SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(8, 37)]


def get_init_inputs():
    return [0.5]
'''

IMPLEMENTATIONS: dict[str, Callable[[], CandidateSynthesizer]] = {
    "offline": OfflineSynthesizer,
    "double": FakeSynthesizer,
}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def synth(request: pytest.FixtureRequest) -> CandidateSynthesizer:
    return IMPLEMENTATIONS[request.param]()


def _request(count: int, parent: ParentInfo | None = None, tried: tuple[Transformation, ...] = ()) -> ProposalRequest:
    return ProposalRequest(spec_source=SPEC, spec_name="softmax_scaled", count=count, parent=parent, tried=tried)


def _key(t: Transformation) -> tuple[str, tuple[tuple[str, str], ...]]:
    return t.name, tuple(sorted(t.params.items()))


def test_it_has_a_name(synth: CandidateSynthesizer) -> None:
    assert isinstance(synth.name, str) and synth.name


@pytest.mark.parametrize("count", [1, 2])
def test_seeds_are_whole_modules_defining_model_new(synth: CandidateSynthesizer, count: int) -> None:
    proposals = synth.propose(_request(count))
    assert 1 <= len(proposals) <= count
    for p in proposals:
        tree = ast.parse(p.source)
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
        assert p.transformation.name and all(isinstance(v, str) for v in p.transformation.params.values())
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in p.genome.items())


def test_proposals_are_deterministic(synth: CandidateSynthesizer) -> None:
    first = [p.source for p in synth.propose(_request(2))]
    again = [p.source for p in type(synth)().propose(_request(2))]
    assert first == again  # a redelivered request re-publishes the same candidates


def test_children_never_repeat_an_edge_already_taken(synth: CandidateSynthesizer) -> None:
    (seed,) = synth.propose(_request(1))
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    children = synth.propose(_request(2, parent))
    assert children, "a fresh seed has at least one transformation left"
    edges = [_key(c.transformation) for c in children]
    assert len(set(edges)) == len(edges)
    later = synth.propose(_request(3, parent, tried=tuple(c.transformation for c in children)))
    assert not {_key(c.transformation) for c in later} & set(edges)


def test_a_spec_that_cannot_load_is_an_invalid_spec(synth: CandidateSynthesizer) -> None:
    with pytest.raises(InvalidSpecError):
        synth.propose(ProposalRequest(spec_source="def get_inputs(:\n", spec_name="broken", count=1))
