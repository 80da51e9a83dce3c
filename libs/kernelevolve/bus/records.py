"""Typed reads of the shared records in the bus KV store (sessions, candidates, nodes).

Every service reads these; one place decodes them and says what is missing.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

from kernelevolve.bus.port import EventBus
from kernelevolve.bus.subjects import Keys
from kernelevolve.errors import NotFoundError
from kernelevolve.v1 import common_pb2 as pb

M = TypeVar("M", bound=Message)


async def get_record(bus: EventBus, key: str, cls: type[M]) -> M | None:
    entry = await bus.kv_get(key)
    if entry is None:
        return None
    msg = cls()
    msg.ParseFromString(entry.value)
    return msg


async def load_session(bus: EventBus, sid: str) -> pb.Session:
    session = await get_record(bus, Keys.session(sid), pb.Session)
    if session is None:
        raise NotFoundError(f"unknown session {sid}")
    return session


async def load_candidate(bus: EventBus, sid: str, cid: str) -> pb.Candidate:
    cand = await get_record(bus, Keys.candidate(sid, cid), pb.Candidate)
    if cand is None:
        raise NotFoundError(f"unknown candidate {cid} in session {sid}")
    return cand


async def get_node(bus: EventBus, sid: str, nid: str) -> pb.Node | None:
    return await get_record(bus, Keys.node(sid, nid), pb.Node)


async def list_nodes(bus: EventBus, sid: str) -> list[pb.Node]:
    """Every node of a session's search tree, in key order."""
    nodes = []
    for key in await bus.kv_keys(Keys.nodes(sid)):
        node = await get_record(bus, key, pb.Node)
        if node is not None:
            nodes.append(node)
    return nodes
