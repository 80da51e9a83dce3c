"""Composition root of the synthesizer service."""

from __future__ import annotations

from contextlib import AsyncExitStack

from ke_synthesizer.grpc_server import SynthesizerServicer
from ke_synthesizer.registry import synthesizer_kind
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.knowledge_client import knowledge_reader
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge
from kernelevolve.ports.synthesis import CandidateSynthesizer
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.store.port import ObjectStore
from kernelevolve.v1 import services_pb2_grpc as sgrpc


async def start(settings: Settings, stack: AsyncExitStack, *, bus: EventBus | None = None,
                store: ObjectStore | None = None, synthesizer: CandidateSynthesizer | None = None,
                knowledge: KnowledgeReader | None = None, port: int | None = None,
                knowledge_target: str | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "synthesizer", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    concurrency = 1
    if synthesizer is None:
        kind = synthesizer_kind(settings)  # every kind, ``agent`` included, comes from the registry
        if knowledge is None and kind.reads_knowledge(settings):
            reader = knowledge_reader(settings, knowledge_target)
            stack.callback(reader.close)
            knowledge = reader
        synthesizer = kind.make(settings, knowledge or NoKnowledge(), bus)
        concurrency = kind.concurrency(settings)
    service = SynthesizerService(bus, store, Subjects(settings.bus.subject_prefix), synthesizer,
                                 concurrency=concurrency)
    server = await start_server(
        settings.grpc.host, settings.grpc.synthesizer_port if port is None else port,
        [lambda s: sgrpc.add_SynthesizerServicer_to_server(SynthesizerServicer(service), s)],
        ["kernelevolve.v1.Synthesizer"], server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    return ServiceHandle("synthesizer", server.port, service)
