"""One contract suite for the bus port, run against the real nats-server and the double."""

from __future__ import annotations

import asyncio

import pytest

from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.subjects import Subjects, subject_matches
from kernelevolve.errors import ConflictError, InvalidSpecError, RetryableError
from kernelevolve.v1 import events_pb2 as ev

S = Subjects("ke")


def _req(sid: str, n: int) -> ev.Envelope:
    return envelope(sid, candidate_requested=ev.CandidateRequested(session_id=sid, request_id=f"r{n}", count=n))


async def _wait_for(pred, timeout: float = 10.0) -> None:
    async def loop() -> None:
        while not pred():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(loop(), timeout)


async def test_durable_consumer_gets_every_message_once(bus) -> None:
    got: list[str] = []

    async def handler(env: ev.Envelope) -> None:
        got.append(env.candidate_requested.request_id)

    for i in range(5):
        await bus.publish(S.request("s1"), _req("s1", i))
    await bus.consume(S.request(), "synth", handler)
    await bus.publish(S.request("s2"), _req("s2", 5))
    await _wait_for(lambda: len(got) == 6)
    await asyncio.sleep(0.2)
    assert got == [f"r{i}" for i in range(6)]


async def test_two_durables_each_see_all_and_shared_durable_splits(bus) -> None:
    a: list[str] = []
    b: list[str] = []
    c: list[str] = []

    async def on(lst: list[str], env: ev.Envelope) -> None:
        lst.append(env.event_id)

    await bus.consume(S.evaluation(), "search", lambda e: on(a, e))
    await bus.consume(S.evaluation(), "knowledge", lambda e: on(b, e))
    await bus.consume(S.evaluation(), "knowledge", lambda e: on(c, e))  # same durable: shares work
    ids = []
    for _i in range(8):
        env = envelope("s1", evaluation_completed=ev.EvaluationCompleted(session_id="s1"))
        ids.append(env.event_id)
        await bus.publish(S.evaluation("s1"), env)
    await _wait_for(lambda: len(a) == 8 and len(b) + len(c) == 8)
    await asyncio.sleep(0.2)
    assert sorted(a) == sorted(ids)
    assert sorted(b + c) == sorted(ids)  # each message to exactly one process of the durable


async def test_failed_handler_is_redelivered_permanent_is_not(bus) -> None:
    attempts: dict[str, int] = {}

    async def handler(env: ev.Envelope) -> None:
        rid = env.candidate_requested.request_id
        attempts[rid] = attempts.get(rid, 0) + 1
        if rid == "r1" and attempts[rid] == 1:
            raise RetryableError("transient")
        if rid == "r2":
            raise InvalidSpecError("never works")

    await bus.consume(S.request(), "synth", handler, max_deliver=3)
    await bus.publish(S.request("s"), _req("s", 1))
    await bus.publish(S.request("s"), _req("s", 2))
    await _wait_for(lambda: attempts.get("r1", 0) >= 2 and attempts.get("r2", 0) >= 1, timeout=15)
    await asyncio.sleep(1.5)
    assert attempts == {"r1": 2, "r2": 1}


async def test_dedup_id_makes_republish_a_no_op(bus) -> None:
    got: list[str] = []

    async def handler(env: ev.Envelope) -> None:
        got.append(env.event_id)

    env = _req("s", 1)
    await bus.publish(S.request("s"), env, dedup_id="cand-1")
    await bus.publish(S.request("s"), env, dedup_id="cand-1")
    await bus.consume(S.request(), "synth", handler)
    await _wait_for(lambda: len(got) >= 1)
    await asyncio.sleep(0.3)
    assert got == [env.event_id]


async def test_watch_replays_then_follows_one_session(bus) -> None:
    await bus.publish(S.request("a"), _req("a", 1))
    await bus.publish(S.request("b"), _req("b", 2))
    seen: list[str] = []

    async def reader() -> None:
        async for env in bus.watch(S.session("a")):
            seen.append(env.candidate_requested.request_id)
            if len(seen) == 2:
                return

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.2)
    await bus.publish(S.request("a"), _req("a", 3))
    await asyncio.wait_for(task, 10)
    assert seen == ["r1", "r3"]


async def test_kv_create_update_conflicts_and_keys(bus) -> None:
    rev = await bus.kv_create("node.s1.n1", b"v1")
    with pytest.raises(ConflictError):
        await bus.kv_create("node.s1.n1", b"again")
    rev2 = await bus.kv_update("node.s1.n1", b"v2", rev)
    with pytest.raises(ConflictError):
        await bus.kv_update("node.s1.n1", b"v3", rev)  # stale revision
    entry = await bus.kv_get("node.s1.n1")
    assert entry is not None and entry.value == b"v2" and entry.revision == rev2
    await bus.kv_put("node.s1.n2", b"x")
    await bus.kv_put("node.s10.n1", b"y")
    assert await bus.kv_keys("node.s1.") == ["node.s1.n1", "node.s1.n2"]
    assert await bus.kv_get("missing.key") is None
    assert await bus.kv_keys("nothing.") == []


@pytest.mark.parametrize(
    ("pattern", "subject", "match"),
    [
        ("ke.*.candidate.cpu", "ke.s1.candidate.cpu", True),
        ("ke.*.candidate.cpu", "ke.s1.candidate.nvidia", False),
        ("ke.s1.>", "ke.s1.session.started", True),
        ("ke.s1.>", "ke.s1", False),
        ("ke.*.evaluation", "ke.s1.evaluation.extra", False),
    ],
)
def test_subject_matching(pattern: str, subject: str, match: bool) -> None:
    assert subject_matches(pattern, subject) is match


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_a_consumer_runs_up_to_its_concurrency_at_once(bus, concurrency: int) -> None:
    running, most, got = 0, 0, []

    async def handler(env: ev.Envelope) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.15)
        running -= 1
        got.append(env.candidate_requested.request_id)

    for i in range(6):
        await bus.publish(S.request("s1"), _req("s1", i))
    await bus.consume(S.request(), f"synth-{concurrency}", handler, concurrency=concurrency)
    await _wait_for(lambda: len(got) == 6)
    assert sorted(got) == [f"r{i}" for i in range(6)]
    assert most == concurrency


async def test_delivery_counts_attempts_and_stops_at_max_deliver(bus) -> None:
    deliveries: list[int] = []

    async def handler(env: ev.Envelope) -> None:
        deliveries.append(env.delivery)
        raise RetryableError("still failing")

    await bus.consume(S.request(), "synth", handler, max_deliver=2)
    await bus.publish(S.request("s"), _req("s", 1))
    await _wait_for(lambda: len(deliveries) >= 2, timeout=15)
    await asyncio.sleep(1.5)  # a third delivery would have arrived by now
    assert deliveries == [1, 2]


async def test_unacknowledged_message_goes_to_the_next_consumer_of_the_durable(bus) -> None:
    """A consumer that stops mid-message (its process died) never acknowledged it: the
    durable hands it to the next process, as delivery 2, and nothing else is lost."""
    started = asyncio.Event()
    got: list[tuple[str, int]] = []

    async def dies(env: ev.Envelope) -> None:
        started.set()
        await asyncio.Event().wait()  # stuck until its consumer is torn down

    async def works(env: ev.Envelope) -> None:
        got.append((env.candidate_requested.request_id, env.delivery))

    first = await bus.consume(S.request(), "eval", dies, ack_wait_s=1.0)
    await bus.publish(S.request("s"), _req("s", 1))
    await asyncio.wait_for(started.wait(), 10)
    await first.stop()
    await bus.publish(S.request("s"), _req("s", 2))
    await bus.consume(S.request(), "eval", works, ack_wait_s=1.0)
    await _wait_for(lambda: len(got) == 2, timeout=15)
    await asyncio.sleep(1.5)
    assert sorted(got) == [("r1", 2), ("r2", 1)]
