"""ResumeSession through the real service classes over the in-memory bus and store: what
a resume must recover that no redelivery does (an outbox committed and never published,
a finished session without its end files), a new budget, and ListSessions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ke_evaluator.service import EvaluatorService
from ke_gateway.service import GatewayService
from ke_search.service import SearchService
from ke_search.state import SearchState
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.config import SearchSettings
from kernelevolve.errors import InvalidArgumentError, NotFoundError
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from tests.unit.fakes import FakeJudge, FakeSynthesizer, JudgeValidator
from tests.unit.test_orchestration import SPEC


class _Parts:
    def __init__(self) -> None:
        self.bus, self.store, self.subjects = MemoryBus(redeliver_delay_s=0.01), MemoryStore(), Subjects("ke")
        self.judge = FakeJudge()
        self.search = SearchService(self.bus, self.store, self.subjects)
        self.gw = GatewayService(self.bus, self.store, self.subjects, JudgeValidator(self.judge), SearchSettings(),
                                 "sessions/{session_id}/", "cpu")

    async def workers(self) -> None:
        """The synthesizer and the evaluator (back) up."""
        await SynthesizerService(self.bus, self.store, self.subjects, FakeSynthesizer()).subscribe()
        await EvaluatorService(self.bus, self.store, self.subjects, self.judge, "cpu").subscribe()

    async def state(self, sid: str) -> SearchState:
        entry = await self.bus.kv_get(Keys.search_state(sid))
        assert entry is not None
        return SearchState.from_json(entry.value)

    async def finished(self, sid: str) -> pb.Session:
        async def follow() -> None:
            async for _env in self.gw.watch(sid):
                pass

        await asyncio.wait_for(follow(), 20)
        return await self.gw.get_session(sid)


async def _until(check: Any) -> None:
    for _ in range(400):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_resume_publishes_an_outbox_that_died_with_its_process() -> None:
    p = _Parts()
    real = p.search._publish_outbox
    lost: list[int] = []

    async def dies_before_publishing(session: Any, st: SearchState, nodes: Any, revision: int) -> None:
        if st.outbox_requests and not lost:
            lost.append(revision)  # committed to the state, never published: the process "died"
            return
        await real(session, st, nodes, revision)

    p.search._publish_outbox = dies_before_publishing  # type: ignore[method-assign]
    await p.search.subscribe()
    await p.workers()
    session = await p.gw.start_session(spb.StartSessionRequest(spec=SPEC, budget=2, max_inflight=1))
    sid = session.session_id
    await _until(lambda: _has_outbox(p, sid))
    await asyncio.sleep(0.2)
    assert (await p.state(sid)).generated == []  # nothing comes without the resume

    resumed = await p.gw.resume(sid)
    assert resumed.resumes == 1
    final = await p.finished(sid)
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == 2
    assert (await p.state(sid)).outbox_requests == []
    await p.bus.close()


async def _has_outbox(p: _Parts, sid: str) -> bool:
    entry = await p.bus.kv_get(Keys.search_state(sid))
    return entry is not None and bool(SearchState.from_json(entry.value).outbox_requests)


async def test_resume_with_a_new_budget_continues_when_workers_return() -> None:
    p = _Parts()
    await p.search.subscribe()  # synthesizer and evaluator down
    session = await p.gw.start_session(spb.StartSessionRequest(spec=SPEC, budget=2, max_inflight=1))
    sid = session.session_id
    await _until(lambda: _started(p, sid))
    resumed = await p.gw.resume(sid, budget=3)
    assert resumed.budget == 3 and resumed.resumes == 1

    async def budget_applied() -> bool:
        return (await p.state(sid)).budget == 3

    await _until(budget_applied)
    await p.workers()
    final = await p.finished(sid)
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == 3
    listed = await p.gw.list_sessions()
    assert [s.session_id for s in listed] == [sid] and listed[0].spec.source == ""
    assert await p.gw.list_sessions(pb.SESSION_STATUS_RUNNING) == []
    await p.bus.close()


async def _started(p: _Parts, sid: str) -> bool:
    return await p.bus.kv_get(Keys.search_state(sid)) is not None


async def test_resume_of_a_finished_session_writes_its_missing_end_and_nothing_else() -> None:
    p = _Parts()
    await p.search.subscribe()
    await p.workers()
    session = await p.gw.start_session(spb.StartSessionRequest(spec=SPEC, budget=2, max_inflight=2))
    sid = session.session_id
    final = await p.finished(sid)
    summary_key = f"{final.artifact_prefix}summary.json"
    judged = len(p.judge.evaluated)
    await p.store.delete(summary_key)  # killed after the record said finished, before the files
    again = await p.gw.resume(sid)
    assert again.status == pb.SESSION_STATUS_COMPLETED and again.resumes == 0

    async def rewritten() -> bool:
        return await p.store.exists(summary_key)

    await _until(rewritten)
    assert json.loads(await p.store.get(summary_key))["evaluated"] == 2
    assert len(p.judge.evaluated) == judged  # nothing judged again
    await p.bus.close()


async def test_resume_rejects_unknown_sessions_and_bad_budgets() -> None:
    p = _Parts()
    with pytest.raises(NotFoundError):
        await p.gw.resume("no-such-session")
    with pytest.raises(InvalidArgumentError):
        await p.gw.resume("x", budget=-1)
    with pytest.raises(InvalidArgumentError):
        await p.gw.resume("")
    await p.bus.close()
