"""Composition root of the knowledge service."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.grpc_server import KnowledgeServicer
from ke_knowledge.service import KnowledgeService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from kernelevolve.vector import embedder_from_settings, index_from_settings


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, index: Any = None,
                embedder: Any = None, port: int | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "knowledge", stack)
    if index is None:
        index = index_from_settings(settings.knowledge)
        stack.push_async_callback(index.close)
    kb = KnowledgeBase(index, embedder or embedder_from_settings(settings.knowledge), settings.knowledge.collection)
    await kb.start()
    service = KnowledgeService(bus, Subjects(settings.bus.subject_prefix), kb)
    server = await start_server(
        settings.grpc.host, settings.grpc.knowledge_port if port is None else port,
        [lambda s: sgrpc.add_KnowledgeServicer_to_server(KnowledgeServicer(kb), s)], ["kernelevolve.v1.Knowledge"],
        server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    return ServiceHandle("knowledge", server.port, service)
