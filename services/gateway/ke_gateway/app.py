"""Composition root of the gateway service."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from ke_gateway.grpc_server import GatewayServicer
from ke_gateway.knowledge_proxy import KnowledgeProxy
from ke_gateway.service import GatewayService
from ke_gateway.validator import GrpcSpecValidator, SpecValidator
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2_grpc as sgrpc


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                validator: SpecValidator | None = None, port: int | None = None,
                default_hardware: str | None = None, knowledge_target: str | None = None) -> ServiceHandle:
    bus = bus or await connect_bus(settings.bus, "gateway", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    if validator is None:
        target = settings.grpc.evaluator_target or f"127.0.0.1:{settings.grpc.evaluator_port}"
        # Internal calls carry the first accepted token: every server of one deployment shares the list.
        tokens = settings.auth.token_list
        grpc_validator = GrpcSpecValidator(target, timeout_s=settings.gateway.validate_timeout_s,
                                           token=tokens[0] if tokens else "")
        stack.push_async_callback(grpc_validator.close)
        validator = grpc_validator
    hw = default_hardware or (settings.evaluator.hardware_kind if settings.evaluator.hardware_kind != "auto"
                              else "cpu")
    service = GatewayService(bus, store, Subjects(settings.bus.subject_prefix), validator, settings.search,
                             settings.store.session_prefix, hw, settings.gateway, agent=settings.agent)
    k_target = (knowledge_target or settings.learning.knowledge_target
                or f"127.0.0.1:{settings.grpc.knowledge_port}")
    tokens = settings.auth.token_list
    proxy = KnowledgeProxy(k_target, token=tokens[0] if tokens else "")
    stack.push_async_callback(proxy.close)
    server = await start_server(
        settings.grpc.host, settings.grpc.gateway_port if port is None else port,
        [lambda s: sgrpc.add_GatewayServicer_to_server(GatewayServicer(service), s),
         lambda s: sgrpc.add_KnowledgeServicer_to_server(proxy, s)],
        ["kernelevolve.v1.Gateway", "kernelevolve.v1.Knowledge"], server_options(settings, public=True))
    stack.push_async_callback(server.stop)
    return ServiceHandle("gateway", server.port, service)
