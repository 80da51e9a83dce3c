"""The embedded default: all five services in this process, over a real nats-server
started on a free loopback port with its JetStream data inside the run folder, a
folder-backed object store rooted at the run folder, and Qdrant in local mode in the
user-level knowledge folder (``default_knowledge_dir``) that every session shares, so
that what one session distils the next one retrieves.

Nothing else needs to be running; every service still talks to the others only
through the bus and gRPC, exactly as in a distributed deployment.
"""

from __future__ import annotations

import logging
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelevolve.bus.nats_server import NatsServer
from kernelevolve.config import Settings, default_knowledge_dir
from kernelevolve.runtime import ServiceHandle

log = logging.getLogger(__name__)


@dataclass
class EmbeddedHandles:
    nats_url: str
    gateway: ServiceHandle
    evaluator: ServiceHandle
    synthesizer: ServiceHandle
    search: ServiceHandle
    knowledge: ServiceHandle
    settings: Settings


def embedded_settings(base: Settings, run_dir: Path, nats_url: str) -> Settings:
    knowledge_path = base.knowledge.path or str(default_knowledge_dir(os.environ))
    return replace(
        base,
        bus=replace(base.bus, url=nats_url),
        store=replace(base.store, kind="folder", root=str(run_dir), session_prefix=""),
        knowledge=replace(base.knowledge, path=knowledge_path, url=""),
        grpc=replace(base.grpc, host="127.0.0.1"),
    )


async def start_embedded(base: Settings, run_dir: Path, stack: AsyncExitStack,
                         overrides: dict[str, Any] | None = None) -> EmbeddedHandles:
    """Start nats-server and the five services; everything stops when ``stack`` closes."""
    from ke_evaluator import app as evaluator_app
    from ke_gateway import app as gateway_app
    from ke_knowledge import app as knowledge_app
    from ke_search import app as search_app
    from ke_synthesizer import app as synthesizer_app

    overrides = overrides or {}
    server = NatsServer(run_dir / ".nats")
    server.start()
    stack.callback(server.stop)
    settings = embedded_settings(base, run_dir, server.url)
    evaluator = await evaluator_app.start(settings, stack, port=0, **overrides.get("evaluator", {}))
    knowledge = await knowledge_app.start(settings, stack, port=0, **overrides.get("knowledge", {}))
    synthesizer = await synthesizer_app.start(settings, stack, port=0,
                                              **{"knowledge_target": knowledge.target,
                                                 **overrides.get("synthesizer", {})})
    search = await search_app.start(settings, stack, port=0,
                                    **{"knowledge_target": knowledge.target, **overrides.get("search", {})})
    gw_settings = replace(settings, grpc=replace(settings.grpc, evaluator_target=evaluator.target))
    gateway = await gateway_app.start(gw_settings, stack, port=0,
                                      default_hardware=evaluator.service.hardware_kind,
                                      knowledge_target=knowledge.target,
                                      **overrides.get("gateway", {}))
    log.info("embedded stack ready", extra={"nats": server.url, "gateway": gateway.target})
    return EmbeddedHandles(server.url, gateway, evaluator, synthesizer, search, knowledge, settings)
