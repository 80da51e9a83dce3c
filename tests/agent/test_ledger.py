"""The agent request ledger: offers, timeouts and re-offers, expiry, refusals; over the
in-memory bus (logic) and a real nats-server (the JetStream key-value store)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kernelevolve.agent_ledger import (
    ABANDONED,
    ANSWERED,
    OPEN,
    TAKEN,
    AgentLedger,
    check_answer,
    new_record,
    parse_request_id,
)
from kernelevolve.bus.jetstream import JetStreamBus
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import BusSettings
from kernelevolve.errors import ConflictError, InvalidArgumentError, NotFoundError
from kernelevolve.v1 import services_pb2 as spb

GOOD = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=["memory", "jetstream"])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[object]:
    if request.param == "memory":
        b: object = MemoryBus()
    else:
        b = await JetStreamBus.connect(BusSettings(url=request.getfixturevalue("nats_server")))
    yield b
    await b.close()  # type: ignore[attr-defined]


def _record(clock: Clock, slot: str = "r1-1", session: str = "s1", timeout_s: float = 10.0,
            max_offers: int = 2) -> spb.AgentRequest:
    return new_record(session, slot, prompt="write it", spec_name="op", spec_source="spec", parent_id="",
                      parent_source="", hardware_kind="cpu", timeout_s=timeout_s, max_offers=max_offers,
                      now=clock())


async def test_a_request_is_taken_once_answered_once_and_waited_for(bus: object) -> None:
    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    posted = await ledger.post(_record(clock))
    assert posted.request_id == "s1.r1-1.1" and posted.state == OPEN
    taken = await ledger.next(agent="alice")
    assert taken.request_id == posted.request_id and taken.state == TAKEN and taken.taken_by == "alice"
    with pytest.raises(NotFoundError, match="no agent request pending"):
        await ledger.next()  # nobody else gets a taken request
    done = await ledger.submit(taken.request_id, GOOD, agent="alice")
    assert done.state == ANSWERED and done.answer_source == GOOD and done.answered_by == "alice"
    assert (await ledger.wait("s1", "r1-1", poll_s=0.01)).state == ANSWERED
    with pytest.raises(ConflictError, match="already answered by alice"):
        await ledger.submit(taken.request_id, GOOD)


async def test_an_unanswered_offer_is_re_offered_then_abandoned(bus: object) -> None:
    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    await ledger.post(_record(clock, timeout_s=10.0, max_offers=2))
    first = await ledger.next(agent="slow")
    clock.t += 11.0  # the taker's deadline passes
    again = await ledger.next(agent="fast")
    assert again.offer == 2 and again.request_id == "s1.r1-1.2" and again.taken_by == "fast"
    with pytest.raises(ConflictError, match="expired.*re-offered as s1.r1-1.2"):
        await ledger.submit(first.request_id, GOOD)  # the late answer to offer 1
    clock.t += 11.0
    gone = await ledger.wait("s1", "r1-1", poll_s=0.01)
    assert gone.state == ABANDONED and "after 2 offer(s)" in gone.reason and "abandoned" in gone.reason
    with pytest.raises(ConflictError, match="expired"):
        await ledger.submit(again.request_id, GOOD)
    with pytest.raises(NotFoundError):
        await ledger.next()


async def test_an_offer_nobody_takes_times_out_too(bus: object) -> None:
    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    await ledger.post(_record(clock, timeout_s=5.0, max_offers=3))
    clock.t += 5.0
    rec = await ledger.refresh("s1", "r1-1")
    assert rec is not None and rec.state == OPEN and rec.offer == 2 and rec.deadline == clock.t + 5.0


async def test_unknown_and_malformed_ids_are_refused(bus: object) -> None:
    ledger = AgentLedger(bus, Clock())  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match="s9.r1-1.1 refused: unknown request"):
        await ledger.submit("s9.r1-1.1", GOOD)
    for bad in ("nonsense", "a.b.c", "a b.c.1", "a.b.1.2"):
        with pytest.raises(InvalidArgumentError):
            await ledger.submit(bad, GOOD)


@pytest.mark.parametrize("source, why", [
    ("def forward(:\n", "does not parse"),
    ("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n", "defining ModelNew"),
])
async def test_an_answer_that_is_no_model_new_module_is_refused_and_the_offer_stays(bus: object, source: str,
                                                                                     why: str) -> None:
    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    await ledger.post(_record(clock))
    taken = await ledger.next()
    with pytest.raises(InvalidArgumentError, match=why):
        await ledger.submit(taken.request_id, source)
    assert (await ledger.submit(taken.request_id, GOOD)).state == ANSWERED  # may still answer properly


async def test_a_redelivered_request_finds_its_record_and_sessions_are_kept_apart(bus: object) -> None:
    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    await ledger.post(_record(clock, session="s1"))
    taken = await ledger.next("s1")
    again = await ledger.post(_record(clock, session="s1"))  # the synthesis request came back
    assert again.state == TAKEN and again.request_id == taken.request_id
    await ledger.post(_record(clock, session="s2", slot="r4-2"))
    with pytest.raises(NotFoundError, match="for session s1"):
        await ledger.next("s1")
    other = await ledger.next("s2", wait_s=1.0, poll_s=0.01)
    assert other.session_id == "s2" and other.slot_id == "r4-2"


def test_request_ids_and_answers_are_checked() -> None:
    assert parse_request_id("s-1.r2-3.4") == ("s-1", "r2-3", 4)
    check_answer("ModelNew = object\n")  # an alias counts
    with pytest.raises(InvalidArgumentError, match="larger than"):
        check_answer("#" * (2 << 20))


async def test_a_request_of_an_ended_session_is_abandoned(bus: object) -> None:
    from kernelevolve.bus.subjects import Keys
    from kernelevolve.v1 import common_pb2 as pb

    clock = Clock()
    ledger = AgentLedger(bus, clock)  # type: ignore[arg-type]
    session = pb.Session(session_id="s1", status=pb.SESSION_STATUS_CANCELLED)
    await bus.kv_put(Keys.session("s1"), session.SerializeToString())  # type: ignore[attr-defined]
    taken = await (ledger.post(_record(clock)))
    gone = await ledger.wait("s1", "r1-1", poll_s=0.01, session_check_s=0.0)
    assert gone.state == ABANDONED and "session s1 ended (cancelled)" in gone.reason
    with pytest.raises(ConflictError, match="expired"):
        await ledger.submit(taken.request_id, GOOD)
