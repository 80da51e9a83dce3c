"""Resuming a watch after a sequence number: contract for both bus adapters."""

from __future__ import annotations

import asyncio

from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.subjects import Subjects
from kernelevolve.v1 import events_pb2 as ev

S = Subjects("ke")


def _req(sid: str, n: int) -> ev.Envelope:
    return envelope(sid, candidate_requested=ev.CandidateRequested(session_id=sid, request_id=f"r{n}", count=n))


async def _take(bus, subject: str, n: int, after: int = 0) -> list[ev.Envelope]:
    got: list[ev.Envelope] = []

    async def reader() -> None:
        async for env in bus.watch(subject, after_sequence=after):
            got.append(env)
            if len(got) == n:
                return

    await asyncio.wait_for(reader(), 10)
    return got


async def test_watch_resumes_after_the_last_sequence_seen(bus) -> None:
    for i in range(1, 7):  # interleave another session so that sequences are not contiguous
        await bus.publish(S.request("a" if i % 2 else "b"), _req("a" if i % 2 else "b", i))
    first = await _take(bus, S.session("a"), 3)
    assert [e.candidate_requested.request_id for e in first] == ["r1", "r3", "r5"]
    seqs = [e.sequence for e in first]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    # A watcher that saw r1 resumes: r3 and r5 again, then a new r7, nothing twice.
    resumed_task = asyncio.create_task(_take(bus, S.session("a"), 3, after=seqs[0]))
    await asyncio.sleep(0.2)
    await bus.publish(S.request("a"), _req("a", 7))
    resumed = await resumed_task
    assert [e.candidate_requested.request_id for e in resumed] == ["r3", "r5", "r7"]
    assert [e.sequence for e in resumed][:2] == seqs[1:]
