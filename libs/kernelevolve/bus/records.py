"""Typed reads of the shared records in the bus KV store (sessions, candidates, nodes).

Every service reads these; one place decodes them and says what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import Message

from kernelevolve.bus.port import EventBus
from kernelevolve.bus.subjects import Keys
from kernelevolve.errors import ConflictError, NotFoundError
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


async def update_session(bus: EventBus, sid: str, change: Callable[[pb.Session], bool],
                         attempts: int = 20) -> pb.Session:
    """Read-modify-write of a session record, compare-and-set against its revision:
    ``change`` edits the record and returns whether to write it (False leaves it as read).
    A write that loses to another writer (the search service, a gateway replica) re-reads
    and re-applies. Returns the record as written, or as read when left alone."""
    for _attempt in range(attempts):
        entry = await bus.kv_get(Keys.session(sid))
        if entry is None:
            raise NotFoundError(f"unknown session {sid}")
        session = pb.Session()
        session.ParseFromString(entry.value)
        if not change(session):
            return session
        try:
            await bus.kv_update(Keys.session(sid), session.SerializeToString(), entry.revision)
            return session
        except ConflictError:
            continue  # moved meanwhile: re-read and re-apply
    raise ConflictError(f"session record of {sid} kept changing under us")


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
