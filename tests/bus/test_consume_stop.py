"""A consumer that fetches many messages at once (``concurrency`` 64, a batched fetch on
JetStream) and is stopped while messages keep arriving and a slow handler runs: ``stop()``
returns, its fetch loop is gone, and a consumer started after it on the same durable gets
every message it did not finish at once, long before ``ack_wait`` would bring them back.

Stopping mid-stream is where a batched consumer lost its way: on Python 3.11 a cancel that
lands in the same loop turn as an arriving message is dropped inside nats-py's
``next_msg`` (``asyncio.wait_for``), the fetch loop went on fetching and ``stop()`` and the
bus's ``close()`` never returned; and messages fetched, or being handled, when the loop
was cancelled stayed unacknowledged until ``ack_wait`` ran out. Each run of the loop below
stops one consumer at a different point of the stream. Against the adapter before the fix,
20 runs of 20 failed (10 hung in ``stop()``, 10 left messages held); the default variant
runs 3, the slow one 40."""

from __future__ import annotations

import asyncio

import pytest

from kernelevolve.bus.envelope import envelope
from kernelevolve.v1 import events_pb2 as ev

MESSAGES = 300
SLOW_EVERY = 16  # one handler in 16 takes a while (a long evaluation among quick ones)
# Far beyond the waits below: a message the stopped consumer kept cannot come back in time.
ACK_WAIT_S = 120.0
# Guards against a hang, not measurements: a healthy stop takes at most one fetch timeout
# (1 s) and the second consumer needs well under a second of handling.
STOP_GUARD_S = 15.0
FINISH_GUARD_S = 30.0


def _consumer_tasks(durable: str) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if not t.done() and durable in t.get_name().split(":")]


async def _stop(sub: object, durable: str) -> None:
    stopping = asyncio.create_task(sub.stop())  # type: ignore[attr-defined]
    done, _ = await asyncio.wait({stopping}, timeout=STOP_GUARD_S)
    assert stopping in done, "stop() did not return: the fetch loop went on after its cancel"
    stopping.result()
    assert not _consumer_tasks(durable), "the consumer's loop is still running after stop()"


async def _stop_mid_stream(bus: object, run: int) -> None:
    durable = f"stoptest{run}"
    completed: dict[int, int] = {}
    progress = asyncio.Condition()

    async def handler(env: ev.Envelope) -> None:
        i = int(env.session_id.rsplit("-", 1)[1])
        if i % SLOW_EVERY == run % SLOW_EVERY:
            await asyncio.sleep(0.5)
        completed[i] = completed.get(i, 0) + 1
        async with progress:
            progress.notify_all()

    async def publish_all() -> None:
        for i in range(MESSAGES):
            sid = f"r{run}-{i}"
            await bus.publish(f"ke.{durable}.{i}", envelope(sid, candidate_requested=ev.CandidateRequested(  # type: ignore[attr-defined]
                session_id=sid, request_id="r1", count=1)))

    async def completed_at_least(n: int) -> None:
        async with progress:
            await progress.wait_for(lambda: len(completed) >= n)

    publisher = asyncio.create_task(publish_all())
    first = await bus.consume(f"ke.{durable}.>", durable, handler, concurrency=64,  # type: ignore[attr-defined]
                              ack_wait_s=ACK_WAIT_S)
    # Stop at a point that moves from run to run, while messages still arrive.
    await asyncio.wait_for(completed_at_least(40 + (run * 37) % 180), FINISH_GUARD_S)
    await _stop(first, durable)
    await asyncio.wait_for(publisher, FINISH_GUARD_S)

    second = await bus.consume(f"ke.{durable}.>", durable, handler, concurrency=64,  # type: ignore[attr-defined]
                               ack_wait_s=ACK_WAIT_S)
    try:
        await asyncio.wait_for(completed_at_least(MESSAGES), FINISH_GUARD_S)
    except TimeoutError:
        missing = sorted(set(range(MESSAGES)) - set(completed))
        pytest.fail(f"run {run}: {len(missing)} messages held by the stopped consumer: {missing[:10]}")
    finally:
        await _stop(second, durable)
    assert set(completed) == set(range(MESSAGES))


async def test_stop_mid_stream_hangs_nothing_and_holds_nothing_back(bus: object) -> None:
    for run in range(3):
        await _stop_mid_stream(bus, run)


@pytest.mark.slow
async def test_stop_mid_stream_many_times(bus: object) -> None:
    """About 1.5 s a run on 2 cores (about a minute in all)."""
    for run in range(40):
        await _stop_mid_stream(bus, run)
