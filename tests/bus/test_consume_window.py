"""``consume(concurrency=k)`` keeps k handlers busy: a handler that waits a long time (a
synthesis request waiting for an outside answer) holds up no message behind it."""

from __future__ import annotations

import asyncio

from kernelevolve.bus.envelope import envelope
from kernelevolve.v1 import events_pb2 as ev


def _req(sid: str) -> ev.Envelope:
    return envelope(sid, candidate_requested=ev.CandidateRequested(session_id=sid, request_id="r1", count=1))


async def test_a_waiting_handler_holds_up_no_later_message(bus) -> None:
    release = asyncio.Event()
    seen: list[str] = []

    async def handler(env: ev.Envelope) -> None:
        seen.append(env.session_id)
        if env.session_id == "slow":
            await release.wait()  # only the last message below lets it go
        elif env.session_id == "c":
            release.set()

    for sid in ("slow", "a", "b", "c"):
        await bus.publish(f"ke.{sid}.request.synth", _req(sid))
    sub = await bus.consume("ke.*.request.synth", "synthesizer", handler, concurrency=2)
    try:
        await asyncio.wait_for(release.wait(), 15)
    finally:
        await sub.stop()
    assert seen[0] == "slow" and sorted(seen[1:]) == ["a", "b", "c"]
