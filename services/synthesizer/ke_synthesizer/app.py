"""Composition root of the synthesizer service."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from ke_synthesizer.grpc_server import SynthesizerServicer
from ke_synthesizer.registry import make_synthesizer
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.knowledge_client import knowledge_reader
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.ports.synthesis import CandidateSynthesizer
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2_grpc as sgrpc


def make_agent_synthesizer(settings: Settings, bus: Any, knowledge: KnowledgeReader | None) -> CandidateSynthesizer:
    """``agent``: requests answered from outside through the ledger on this bus, each asked
    with the prompt the LLM synthesizer would send."""
    import asyncio

    from ke_synthesizer.agent import AgentSynthesizer
    from ke_synthesizer.agent.prompt import llm_prompt
    from kernelevolve.agent_ledger import AgentLedger
    from kernelevolve.ports.knowledge import NoKnowledge

    return AgentSynthesizer(AgentLedger(bus), settings.agent,
                            prompt=llm_prompt(knowledge or NoKnowledge(), settings.llm.prompt_tokens),
                            loop=asyncio.get_running_loop())


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                synthesizer: CandidateSynthesizer | None = None, knowledge: KnowledgeReader | None = None,
                port: int | None = None, knowledge_target: str | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "synthesizer", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    concurrency = 1
    if synthesizer is None:
        # prompts (LLM, agent) retrieve documents and skills; the offline synthesizer reads
        # skills only when priors are on
        if knowledge is None and (settings.learning.prior_skills > 0 or settings.synthesizer.kind != "offline"):
            reader = knowledge_reader(settings, knowledge_target)
            stack.callback(reader.close)
            knowledge = reader
        if settings.synthesizer.kind == "agent":
            synthesizer, concurrency = make_agent_synthesizer(settings, bus, knowledge), settings.agent.concurrency
        else:
            synthesizer = make_synthesizer(settings, knowledge)
    service = SynthesizerService(bus, store, Subjects(settings.bus.subject_prefix), synthesizer,
                                 concurrency=concurrency)
    server = await start_server(
        settings.grpc.host, settings.grpc.synthesizer_port if port is None else port,
        [lambda s: sgrpc.add_SynthesizerServicer_to_server(SynthesizerServicer(service), s)],
        ["kernelevolve.v1.Synthesizer"], server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    return ServiceHandle("synthesizer", server.port, service)
