"""The evaluator's delivery guarantees, through the real service class, on the real
nats-server and on the in-memory double: a candidate is judged once even when its
message comes back, an evaluator that stops mid-evaluation loses nothing, and a
candidate that takes its evaluator down every time is settled as ``crashed`` after a
bounded number of deliveries instead of blocking the queue."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from ke_evaluator.service import EvaluatorService
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.config import BusSettings
from kernelevolve.ports.verdict import Verdict
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from tests.unit.fakes import FakeJudge

S = Subjects("ke")
SID = "s1"
SPEC = make_spec("toy", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")

BusFactory = Callable[[], Awaitable[object]]


@pytest.fixture(params=["jetstream", "memory"])
async def new_bus(request: pytest.FixtureRequest) -> AsyncIterator[BusFactory]:
    """A connection per simulated evaluator process (one shared double for the memory bus)."""
    opened: list[object] = []
    shared = MemoryBus(redeliver_delay_s=0.01)
    # Asked for now, so that the server outlives every connection closed below.
    url = request.getfixturevalue("nats_server") if request.param == "jetstream" else ""

    async def factory() -> object:
        if request.param == "memory":
            return shared
        from kernelevolve.bus.jetstream import JetStreamBus

        b = await JetStreamBus.connect(BusSettings(url=url))
        opened.append(b)
        return b

    yield factory
    for b in opened:
        await b.close()  # type: ignore[attr-defined]
    await shared.close()


class StuckJudge(FakeJudge):
    """Never finishes while its evaluator lives: stands for an evaluation that kills it."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.release = threading.Event()
        self._loop = asyncio.get_running_loop()

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False) -> Verdict:
        self.evaluated.append(candidate_id)
        self._loop.call_soon_threadsafe(self.started.set)
        self.release.wait(30)
        return super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker)


async def _seed(bus: object, store: MemoryStore, cid: str) -> None:
    session = pb.Session(session_id=SID, spec=SPEC, artifact_prefix=f"sessions/{SID}/")
    await bus.kv_put(Keys.session(SID), session.SerializeToString())  # type: ignore[attr-defined]
    key = f"sessions/{SID}/candidates/{cid}.py"
    await store.put(key, b"# block=256\nOK\n", "text/x-python")
    cand = pb.Candidate(candidate_id=cid, session_id=SID, source_key=key)
    gen = ev.CandidateGenerated(candidate=cand, hardware=pb.HardwareTarget(kind="cpu"))
    await bus.publish(S.candidate(SID, "cpu"), envelope(SID, candidate_generated=gen),  # type: ignore[attr-defined]
                      dedup_id=f"gen-{SID}-{cid}")


async def _verdicts(bus: object, n: int, settle_s: float = 1.5) -> list[ev.EvaluationResult]:
    """Every EvaluationCompleted of the session once ``n`` have arrived and no more follow."""
    seen: list[ev.EvaluationResult] = []

    async def follow() -> None:
        async for env in bus.watch(S.evaluation(SID)):  # type: ignore[attr-defined]
            seen.append(env.evaluation_completed.result)

    task = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(20):
            while len(seen) < n:
                await asyncio.sleep(0.05)
        await asyncio.sleep(settle_s)
    finally:
        task.cancel()
    return seen


async def test_killed_evaluators_then_crashed_verdict_without_running_it_again(new_bus: BusFactory) -> None:
    store = MemoryStore()
    stuck = []
    for _process in range(2):  # max_attempts=2: two evaluators die on it, in turn
        bus = await new_bus()
        if not stuck:
            await _seed(bus, store, "r1-1")
        judge = StuckJudge()
        stuck.append(judge)
        await EvaluatorService(bus, store, S, judge, "cpu", max_attempts=2, ack_wait_s=1.0).subscribe()
        await asyncio.wait_for(judge.started.wait(), 20)
        await bus.close()  # type: ignore[attr-defined]  # the process is gone, its message unacknowledged
    last = FakeJudge()
    bus = await new_bus()
    await EvaluatorService(bus, store, S, last, "cpu", max_attempts=2, ack_wait_s=1.0).subscribe()
    results = await _verdicts(bus, 1)
    for judge in stuck:
        judge.release.set()
    assert [r.status for r in results] == [pb.EVALUATION_STATUS_CRASHED]
    assert "started 2 times without a verdict" in results[0].reason
    assert last.evaluated == []  # settled without running it a third time
    report = json.loads(await store.get(results[0].report_key))
    assert report["status"] == "crashed" and report["evidence"]["deliveries"] == 3


async def test_evaluator_killed_once_then_judged_exactly_once(new_bus: BusFactory) -> None:
    store = MemoryStore()
    bus = await new_bus()
    await _seed(bus, store, "r1-1")
    judge = StuckJudge()
    await EvaluatorService(bus, store, S, judge, "cpu", max_attempts=2, ack_wait_s=1.0).subscribe()
    await asyncio.wait_for(judge.started.wait(), 20)
    await bus.close()  # type: ignore[attr-defined]
    healthy = FakeJudge()
    bus = await new_bus()
    await EvaluatorService(bus, store, S, healthy, "cpu", max_attempts=2, ack_wait_s=1.0).subscribe()
    results = await _verdicts(bus, 1)
    judge.release.set()
    assert [(r.candidate_id, r.status) for r in results] == [("r1-1", pb.EVALUATION_STATUS_CORRECT)]
    assert healthy.evaluated == ["r1-1"]


async def test_redelivery_after_the_report_was_persisted_republishes_it_without_judging(
        new_bus: BusFactory) -> None:
    """A crash between persisting the report and acknowledging: the next delivery answers
    from the stored report, and the re-published verdict is de-duplicated on the bus."""
    store = MemoryStore()
    bus = await new_bus()
    await _seed(bus, store, "r1-1")
    judge = FakeJudge()
    service = EvaluatorService(bus, store, S, judge, "cpu")
    await service.subscribe()
    first = await _verdicts(bus, 1, settle_s=0.2)
    env = envelope(SID, candidate_generated=ev.CandidateGenerated(candidate=pb.Candidate(
        candidate_id="r1-1", session_id=SID, source_key=f"sessions/{SID}/candidates/r1-1.py")))
    env.delivery = 2
    await service.on_candidate(env)
    again = await _verdicts(bus, 1, settle_s=0.5)
    assert judge.evaluated == ["r1-1"]
    assert len(first) == len(again) == 1 and again[0] == first[0]
