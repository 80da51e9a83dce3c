"""``build_stack`` wires the five services from whatever fills each port. Here every port
is filled by its double (bus, object store, judge, synthesizer, knowledge reader, vector
index, embedder) and a session runs to its end through the gateway; the embedded stack's
real parts (nats-server, folder store, Qdrant local, the sandboxed Judge) run in
tests/e2e/test_embedded.py."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace

import pytest

from ke_cli.stack import Stack, build_stack
from ke_synthesizer.agent import AgentSynthesizer
from ke_synthesizer.registry import SYNTHESIZERS, synthesizer_kind
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import Settings, load_settings
from kernelevolve.errors import ConfigError
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.vector import HashEmbedder, MemoryIndex
from tests.unit.fakes import FakeJudge, FakeSynthesizer
from tests.unit.knowledge_fakes import FakeKnowledge

SPEC = ("import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


async def _run(built: Stack, budget: int) -> pb.Session:
    gateway = built.gateway.service
    session = await gateway.start_session(spb.StartSessionRequest(spec=make_spec("toy", SPEC), budget=budget,
                                                                  strategy="greedy", hardware_kind="cpu"))
    async for env in gateway.watch(session.session_id):
        if env.WhichOneof("payload") == "session_completed":
            break
    return await gateway.get_session(session.session_id)  # type: ignore[no-any-return]


async def test_a_double_in_every_port_runs_a_session() -> None:
    bus, store, judge, synth, knowledge = MemoryBus(), MemoryStore(), FakeJudge(), FakeSynthesizer(), FakeKnowledge()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        built = await build_stack(Settings(), stack, bus=bus, store=store, judge=judge, synthesizer=synth,
                                  knowledge=knowledge)
        final = await _run(built, budget=3)
        artifacts = await store.list(final.artifact_prefix)
    assert built.knowledge is None  # a reader was given: no knowledge service runs
    assert built.settings.grpc.host == "127.0.0.1"
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.best_candidate_id
    # each double did its port's work: proposals, verdicts, skill priors, artifacts
    assert len(synth.calls) >= 1 and final.best_candidate_id in judge.evaluated
    assert knowledge.calls >= 1
    assert any(key.endswith("summary.json") for key in artifacts)


async def test_the_knowledge_service_runs_on_index_and_embedder_doubles() -> None:
    bus, store, index, judge = MemoryBus(), MemoryStore(), MemoryIndex(), FakeJudge()
    settings = Settings()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        built = await build_stack(settings, stack, bus=bus, store=store, judge=judge, synthesizer=FakeSynthesizer(),
                                  index=index, embedder=HashEmbedder())
        seeded = await index.count(settings.knowledge.collection)
        final = await _run(built, budget=2)
    assert built.knowledge is not None and built.knowledge.port > 0
    assert seeded > 0  # the knowledge service seeded its documents into the index double
    assert final.status == pb.SESSION_STATUS_COMPLETED and len(judge.evaluated) >= 2


async def test_the_agent_synthesizer_comes_from_the_registry() -> None:
    settings = load_settings(env={"KE_SYNTHESIZER_KIND": "agent", "KE_AGENT_CONCURRENCY": "3"})
    assert set(SYNTHESIZERS) == {"offline", "llm", "offline+llm", "agent"}
    kind = synthesizer_kind(settings)
    assert kind.concurrency(settings) == 3 and kind.reads_knowledge(settings)
    bus = MemoryBus()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        built = await build_stack(settings, stack, bus=bus, store=MemoryStore(), judge=FakeJudge(),
                                  knowledge=FakeKnowledge())
        service = built.synthesizer.service
        assert isinstance(service._synth, AgentSynthesizer) and service._concurrency == 3
    with pytest.raises(ConfigError, match="needs the service's bus"):
        kind.make(settings, FakeKnowledge(), None)


def test_what_each_kind_reads_and_an_unknown_kind() -> None:
    offline = load_settings(env={})
    assert synthesizer_kind(offline).reads_knowledge(offline)  # skill priors are on by default
    no_priors = replace(offline, learning=replace(offline.learning, prior_skills=0))
    assert not synthesizer_kind(no_priors).reads_knowledge(no_priors)
    assert synthesizer_kind(offline).concurrency(offline) == 1
    with pytest.raises(ConfigError, match=r"available: agent, llm, offline, offline\+llm"):
        synthesizer_kind(load_settings(env={"KE_SYNTHESIZER_KIND": "gpt"}))
