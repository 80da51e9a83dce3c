"""One contract suite for the synthesizer port (``kernelevolve.ports.synthesis``), run
against every implementation: the offline compiler, the LLM synthesizer (against a
scripted OpenAI-compatible server on loopback) and the test double."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from ke_synthesizer.llm import LlmSynthesizer, OpenAIChat
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.config import LlmSettings
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import CandidateSynthesizer, ParentInfo, ProposalRequest, Transformation
from tests.llm.fake_openai import FakeOpenAI, Text
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

# What the scripted endpoint answers every prompt with (the same reply: a deterministic model).
LLM_REPLY = """Here it is.

```python
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf")) * scale
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _softmax_rows[(x.numel() // cols,)](x, y, cols, self.scale, BLOCK=triton.next_power_of_2(cols))
        return y
```
"""

IMPLEMENTATIONS: tuple[str, ...] = ("double", "llm", "offline")


@pytest.fixture(scope="module")
def llm_endpoint() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(api_key="sk-contract", responder=lambda body: Text(LLM_REPLY)).start()
    yield server
    server.stop()


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request: pytest.FixtureRequest) -> Callable[[], CandidateSynthesizer]:
    if request.param == "llm":
        settings = LlmSettings(base_url=request.getfixturevalue("llm_endpoint").url, models="m")
        return lambda: LlmSynthesizer(settings, OpenAIChat(settings, "sk-contract"))
    return {"offline": OfflineSynthesizer, "double": FakeSynthesizer}[request.param]


@pytest.fixture
def synth(make: Callable[[], CandidateSynthesizer]) -> CandidateSynthesizer:
    return make()


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


def test_proposals_are_deterministic(synth: CandidateSynthesizer,
                                    make: Callable[[], CandidateSynthesizer]) -> None:
    # For the LLM synthesizer: given a deterministic endpoint (temperature 0, a seed).
    first = [p.source for p in synth.propose(_request(2))]
    again = [p.source for p in make().propose(_request(2))]
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


def test_a_tuning_request_is_answered_as_children_that_never_repeat_an_edge(synth: CandidateSynthesizer) -> None:
    """``tune``: launch-config neighbours where the synthesizer can tell launch knobs apart,
    else its own tuned variants; either way children of the parent, each edge once."""
    (seed,) = synth.propose(_request(1))
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    first = synth.propose(replace(_request(2, parent), tune=True))
    assert 1 <= len(first) <= 2
    for p in first:
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.parse(p.source).body)
    edges = [_key(c.transformation) for c in first]
    assert len(set(edges)) == len(edges)
    later = synth.propose(replace(_request(2, parent, tried=tuple(c.transformation for c in first)), tune=True))
    assert not {_key(c.transformation) for c in later} & set(edges)


def test_a_spec_that_cannot_load_is_an_invalid_spec(synth: CandidateSynthesizer) -> None:
    with pytest.raises(InvalidSpecError):
        synth.propose(ProposalRequest(spec_source="def get_inputs(:\n", spec_name="broken", count=1))
