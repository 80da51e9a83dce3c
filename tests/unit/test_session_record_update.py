"""kernelevolve.bus.records.update_session: the compare-and-set update of a session record
that the gateway (resume) and the search service (progress, end) share."""

from __future__ import annotations

import pytest

from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.records import load_session, update_session
from kernelevolve.bus.subjects import Keys
from kernelevolve.errors import ConflictError, NotFoundError
from kernelevolve.v1 import common_pb2 as pb


async def _bus_with_session(sid: str = "s1") -> MemoryBus:
    bus = MemoryBus()
    await bus.kv_create(Keys.session(sid), pb.Session(session_id=sid, status=pb.SESSION_STATUS_RUNNING,
                                                      budget=8).SerializeToString())
    return bus


async def test_a_change_is_written_and_returned() -> None:
    bus = await _bus_with_session()

    def grow(s: pb.Session) -> bool:
        s.budget += 4
        return True

    written = await update_session(bus, "s1", grow)
    assert written.budget == 12 and (await load_session(bus, "s1")).budget == 12


async def test_declining_leaves_the_record_as_read() -> None:
    bus = await _bus_with_session()
    before = (await bus.kv_get(Keys.session("s1")))
    assert before is not None

    def decline(s: pb.Session) -> bool:
        s.budget = 99  # edited, but not to be written
        return False

    assert (await update_session(bus, "s1", decline)).budget == 99
    after = await bus.kv_get(Keys.session("s1"))
    assert after is not None and after.revision == before.revision and (await load_session(bus, "s1")).budget == 8


async def test_a_lost_race_is_re_read_and_re_applied() -> None:
    bus = await _bus_with_session()
    calls = []

    async def rival_write() -> None:
        entry = await bus.kv_get(Keys.session("s1"))
        assert entry is not None
        rival = pb.Session()
        rival.ParseFromString(entry.value)
        rival.evaluated = 5
        await bus.kv_update(Keys.session("s1"), rival.SerializeToString(), entry.revision)

    original_get = bus.kv_get

    async def get_then_race(key: str):  # type: ignore[no-untyped-def]
        entry = await original_get(key)
        if not calls:  # the first read goes stale before our write
            calls.append(key)
            await rival_write()
        return entry

    bus.kv_get = get_then_race  # type: ignore[method-assign]

    def resume(s: pb.Session) -> bool:
        s.resumes += 1
        return True

    written = await update_session(bus, "s1", resume)
    stored = await load_session(bus, "s1")
    assert written.resumes == 1 and stored.resumes == 1 and stored.evaluated == 5  # both writes kept


async def test_unknown_session_and_a_record_that_never_settles() -> None:
    bus = await _bus_with_session()
    with pytest.raises(NotFoundError, match="unknown session nope"):
        await update_session(bus, "nope", lambda s: True)

    async def always_stale(key: str, value: bytes, revision: int) -> int:
        raise ConflictError("moved")

    bus.kv_update = always_stale  # type: ignore[method-assign]
    with pytest.raises(ConflictError, match="kept changing under us"):
        await update_session(bus, "s1", lambda s: True, attempts=3)
