"""The embedded default: all five services in this process, over a real nats-server
started on a free loopback port with its JetStream data inside the run folder, a
folder-backed object store rooted at the run folder, and Qdrant in local mode in the
user-level knowledge folder (``default_knowledge_dir``) that every session shares, so
that what one session distils the next one retrieves.

Nothing else needs to be running; every service still talks to the others only
through the bus and gRPC, exactly as in a distributed deployment. The services are
wired by ``ke_cli.stack.build_stack``; this module only chooses the embedded adapters.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from ke_cli.stack import Stack, build_stack
from kernelevolve.bus.nats_server import NatsServer
from kernelevolve.config import Settings, default_knowledge_dir
from kernelevolve.ports.judge import JudgePort
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.ports.synthesis import CandidateSynthesizer
from kernelevolve.vector.port import Embedder, VectorIndex


@dataclass(frozen=True)
class EmbeddedHandles(Stack):
    nats_url: str = ""


def embedded_settings(base: Settings, run_dir: Path, nats_url: str) -> Settings:
    knowledge_path = base.knowledge.path or str(default_knowledge_dir(os.environ))
    return replace(
        base,
        bus=replace(base.bus, url=nats_url),
        store=replace(base.store, kind="folder", root=str(run_dir), session_prefix=""),
        knowledge=replace(base.knowledge, path=knowledge_path, url=""),
    )


async def start_embedded(base: Settings, run_dir: Path, stack: AsyncExitStack, *, judge: JudgePort | None = None,
                         synthesizer: CandidateSynthesizer | None = None, knowledge: KnowledgeReader | None = None,
                         index: VectorIndex | None = None, embedder: Embedder | None = None) -> EmbeddedHandles:
    """Start nats-server and the five services; everything stops when ``stack`` closes.
    The keyword parts replace the embedded adapter of their port (``build_stack``)."""
    server = NatsServer(run_dir / ".nats")
    server.start()
    stack.callback(server.stop)
    built = await build_stack(embedded_settings(base, run_dir, server.url), stack, judge=judge,
                              synthesizer=synthesizer, knowledge=knowledge, index=index, embedder=embedder)
    return EmbeddedHandles(**vars(built), nats_url=server.url)
