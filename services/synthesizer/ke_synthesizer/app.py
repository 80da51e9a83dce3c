"""Composition root of the synthesizer service."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from ke_synthesizer.grpc_server import SynthesizerServicer
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings, SynthesizerSettings
from kernelevolve.errors import ConfigError
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.ports.synthesis import CandidateSynthesizer
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2_grpc as sgrpc


def make_synthesizer(settings: SynthesizerSettings) -> CandidateSynthesizer:
    if settings.kind == "offline":
        from ke_synthesizer.offline import OfflineSynthesizer

        return OfflineSynthesizer()
    raise ConfigError(f"unknown synthesizer kind {settings.kind!r} (available: offline, agent)")


def make_agent_synthesizer(settings: Settings, bus: Any) -> CandidateSynthesizer:
    """``agent``: requests answered from outside through the ledger on this bus."""
    import asyncio

    from ke_synthesizer.agent import AgentSynthesizer
    from kernelevolve.agent_ledger import AgentLedger

    return AgentSynthesizer(AgentLedger(bus), settings.agent, loop=asyncio.get_running_loop())


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                synthesizer: CandidateSynthesizer | None = None, port: int | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "synthesizer", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    concurrency = 1
    if synthesizer is None and settings.synthesizer.kind == "agent":
        synthesizer, concurrency = make_agent_synthesizer(settings, bus), settings.agent.concurrency
    service = SynthesizerService(bus, store, Subjects(settings.bus.subject_prefix),
                                 synthesizer or make_synthesizer(settings.synthesizer), concurrency=concurrency)
    server = await start_server(
        settings.grpc.host, settings.grpc.synthesizer_port if port is None else port,
        [lambda s: sgrpc.add_SynthesizerServicer_to_server(SynthesizerServicer(service), s)],
        ["kernelevolve.v1.Synthesizer"], server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    return ServiceHandle("synthesizer", server.port, service)
