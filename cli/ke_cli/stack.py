"""The whole stack in this process: the one place that wires the five services together.

Embedded mode (``ke_cli.embedded``: a real nats-server, the folder store, Qdrant local),
the in-process driver of benchmarks and tests (``ke_cli.inprocess``: the memory bus and
store, an injected judge and synthesizer) and the tests that need every service all
call ``build_stack``; what differs between them is only which adapter fills each port.

Every part is optional and typed with its port; ``None`` means the adapter the settings
name (the bus, the object store), the service's own (the evaluator's sandboxed Judge,
the synthesizer of ``synthesizer.kind`` from the synthesizer registry), or, for
knowledge, the knowledge service itself, started here, which the synthesizer and the
search service then read over gRPC as in a deployment. Services still reach one another
only through the bus and gRPC: nothing here hands one service's object to another.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

from ke_evaluator import app as evaluator_app
from ke_gateway import app as gateway_app
from ke_knowledge import app as knowledge_app
from ke_search import app as search_app
from ke_synthesizer import app as synthesizer_app
from kernelevolve.bus.port import EventBus
from kernelevolve.config import Settings
from kernelevolve.ports.judge import JudgePort
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.ports.synthesis import CandidateSynthesizer
from kernelevolve.runtime import ServiceHandle
from kernelevolve.store.port import ObjectStore
from kernelevolve.vector.port import Embedder, VectorIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stack:
    """The running services, each with its gRPC port on loopback."""

    settings: Settings  # what the services were started with
    gateway: ServiceHandle
    evaluator: ServiceHandle
    synthesizer: ServiceHandle
    search: ServiceHandle
    knowledge: ServiceHandle | None  # None: a knowledge reader was given instead of the service


async def build_stack(settings: Settings, stack: AsyncExitStack, *, bus: EventBus | None = None,
                      store: ObjectStore | None = None, judge: JudgePort | None = None,
                      synthesizer: CandidateSynthesizer | None = None, knowledge: KnowledgeReader | None = None,
                      index: VectorIndex | None = None, embedder: Embedder | None = None) -> Stack:
    """Start the five services (four when ``knowledge`` is given); they stop when ``stack`` closes.

    ``bus``/``store``: shared by every service (``None``: each connects its own from the
    settings, as separate processes would). ``judge``: the evaluator's. ``synthesizer``:
    the synthesizer service's. ``knowledge``: what the synthesizer and the search service
    retrieve from, instead of a knowledge service. ``index``/``embedder``: the knowledge
    service's vector index and embedder (``None``: from ``settings.knowledge``)."""
    # One process: every server on loopback, each on a free port.
    settings = replace(settings, grpc=replace(settings.grpc, host="127.0.0.1"))
    evaluator = await evaluator_app.start(settings, stack, bus=bus, store=store, judge=judge, port=0)
    k_service: ServiceHandle | None = None
    if knowledge is None:
        k_service = await knowledge_app.start(settings, stack, bus=bus, index=index, embedder=embedder, port=0)
    k_target = k_service.target if k_service else None
    synth = await synthesizer_app.start(settings, stack, bus=bus, store=store, synthesizer=synthesizer,
                                        knowledge=knowledge, knowledge_target=k_target, port=0)
    search = await search_app.start(settings, stack, bus=bus, store=store, knowledge=knowledge,
                                    knowledge_target=k_target, port=0)
    # The gateway validates specs through the evaluator's RPC, as deployed.
    gw_settings = replace(settings, grpc=replace(settings.grpc, evaluator_target=evaluator.target))
    gateway = await gateway_app.start(gw_settings, stack, bus=bus, store=store, port=0,
                                      default_hardware=evaluator.service.hardware_kind, knowledge_target=k_target)
    log.info("stack ready", extra={"gateway": gateway.target, "knowledge": k_target})
    return Stack(settings, gateway, evaluator, synth, search, k_service)
