"""Composition root of the knowledge service."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import doc_to_proto
from ke_knowledge.grpc_server import KnowledgeServicer
from ke_knowledge.ingest import documents_from_file
from ke_knowledge.service import KnowledgeService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from kernelevolve.vector import embedder_from_settings, index_from_settings


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, index: Any = None,
                embedder: Any = None, port: int | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "knowledge", stack)
    if index is None:
        index = index_from_settings(settings.knowledge, shared=settings.learning.shared_folder,
                                    lock_timeout_s=settings.learning.lock_timeout_s)
        stack.push_async_callback(index.close)
    kb = KnowledgeBase(index, embedder or embedder_from_settings(settings.knowledge), settings.knowledge.collection)
    await kb.start()
    service = KnowledgeService(bus, Subjects(settings.bus.subject_prefix), kb, min_gain=settings.learning.min_gain)
    server = await start_server(
        settings.grpc.host, settings.grpc.knowledge_port if port is None else port,
        [lambda s: sgrpc.add_KnowledgeServicer_to_server(KnowledgeServicer(kb), s)], ["kernelevolve.v1.Knowledge"],
        server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    return ServiceHandle("knowledge", server.port, service)


async def open_local(settings: Settings, stack: AsyncExitStack) -> KnowledgeServicer:
    """The ``Knowledge`` API over the local folder ``settings.knowledge.path``, in this
    process and without a server: the CLI's commands when no deployment is named. The
    folder is opened shared (per operation) so running sessions keep using it."""
    index = index_from_settings(settings.knowledge, shared=True, lock_timeout_s=settings.learning.lock_timeout_s)
    stack.push_async_callback(index.close)
    kb = KnowledgeBase(index, embedder_from_settings(settings.knowledge), settings.knowledge.collection)
    await kb.start(reseed=False)
    return KnowledgeServicer(kb)


def documents_from_files(paths: Sequence[Path], *, hardware_kind: str, kind: str,
                         op_family: str) -> list[pb.KnowledgeDocument]:
    """Knowledge documents of user files (``ke_knowledge.ingest``), as the API takes them."""
    return [doc_to_proto(d) for p in paths
            for d in documents_from_file(p, hardware_kind=hardware_kind, kind=kind, op_family=op_family)]
