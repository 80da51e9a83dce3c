"""Composition root of the search service."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import grpc

from ke_search.service import SearchService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.knowledge_client import knowledge_reader
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class SearchServicer(sgrpc.SearchServicer):
    def __init__(self, service: SearchService) -> None:
        self._service = service

    async def GetTree(self, request: spb.SessionRef, context: grpc.aio.ServicerContext) -> spb.Tree:
        return spb.Tree(session_id=request.session_id, nodes=await self._service.nodes(request.session_id))


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                port: int | None = None, knowledge: KnowledgeReader | None = None,
                knowledge_target: str | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "search", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    if knowledge is None and settings.learning.prior_skills > 0:
        reader = knowledge_reader(settings, knowledge_target)
        stack.callback(reader.close)
        knowledge = reader
    service = SearchService(bus, store, Subjects(settings.bus.subject_prefix), finalists=settings.search.finalists,
                            max_retimes=settings.search.max_retimes, max_promotions=settings.search.max_promotions,
                            repair_attempts=settings.llm.repair_attempts, knowledge=knowledge,
                            prior_skills=settings.learning.prior_skills)
    server = await start_server(
        settings.grpc.host, settings.grpc.search_port if port is None else port,
        [lambda s: sgrpc.add_SearchServicer_to_server(SearchServicer(service), s)], ["kernelevolve.v1.Search"],
        server_options(settings))
    stack.push_async_callback(server.stop)
    stack.push_async_callback(service.close)
    await service.subscribe()
    return ServiceHandle("search", server.port, service)
