"""The synthesizer contract suite (tests/contracts/test_synthesizer_port.py) run against the
agent synthesizer, its requests answered by a scripted agent through the ledger."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from ke_synthesizer.agent import AgentSynthesizer
from kernelevolve.agent_ledger import AgentLedger
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import AgentSettings
from kernelevolve.errors import NotFoundError
from kernelevolve.ports.synthesis import CandidateSynthesizer, ProposalRequest
from tests.contracts.test_synthesizer_port import (  # noqa: F401 - the suite, collected here too
    SPEC,
    test_a_spec_that_cannot_load_is_an_invalid_spec,
    test_children_never_repeat_an_edge_already_taken,
    test_it_has_a_name,
    test_proposals_are_deterministic,
    test_seeds_are_whole_modules_defining_model_new,
)


def scripted_answer(prompt: str, parent_source: str) -> str:
    """Deterministic: the same request always gets the same module."""
    depth = parent_source.count("# child") + (1 if parent_source else 0)
    return ("import torch\nimport triton\n\n" + "# child\n" * depth
            + "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n")


class ScriptedAgentSynthesizer(AgentSynthesizer):
    """The agent synthesizer on its own event loop (a thread), with a scripted agent that
    takes every open request from the ledger and answers it."""

    def __init__(self) -> None:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True, name="agent-contract").start()
        self.bus = MemoryBus()
        super().__init__(AgentLedger(self.bus), AgentSettings(timeout_s=30.0, poll_s=0.01), loop=loop)
        self.answered: list[str] = []
        self._agent = asyncio.run_coroutine_threadsafe(self._answer_forever(), loop)

    async def _answer_forever(self) -> None:
        ledger = AgentLedger(self.bus)
        while True:
            try:
                rec = await ledger.next(agent="scripted", wait_s=5.0, poll_s=0.01)
            except NotFoundError:
                continue
            await ledger.submit(rec.request_id, scripted_answer(rec.prompt, rec.parent_source), agent="scripted")
            self.answered.append(rec.request_id)


@pytest.fixture
def synth() -> CandidateSynthesizer:
    return ScriptedAgentSynthesizer()


@pytest.fixture
def make() -> Callable[[], CandidateSynthesizer]:
    return ScriptedAgentSynthesizer


def test_the_answer_comes_back_as_an_agent_proposal_naming_who_wrote_it() -> None:
    s = ScriptedAgentSynthesizer()
    (p,) = s.propose(ProposalRequest(spec_source=SPEC, spec_name="softmax_scaled", count=1))
    assert p.transformation.name == "agent" and "written by scripted" in p.description
    assert s.answered and s.answered[0] in p.description
    assert "class ModelNew" in p.source
