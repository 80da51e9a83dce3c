"""A session always ends: a permanent failure in any service's handler ends the session
as failed, with a one-line reason naming the service and the cause.

The real service classes run over the real nats-server and over the in-memory double;
the failure is injected into each service's collaborator (or, for the search, its own
handler), exactly where a real one would raise.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ke_evaluator.service import EvaluatorService
from ke_gateway.service import GatewayService
from ke_knowledge.service import KnowledgeService
from ke_search.service import SearchService
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import SearchSettings
from kernelevolve.errors import ConfigError, IndexUnavailable, InvalidArgumentError, InvalidSpecError, NotFoundError
from kernelevolve.ports.synthesis import Proposal, ProposalRequest
from kernelevolve.ports.verdict import Verdict
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb
from tests.unit.fakes import FakeJudge, FakeSynthesizer, JudgeValidator
from tests.unit.test_orchestration import SPEC

S = Subjects("ke")


class NoInitSynthesizer(FakeSynthesizer):
    """Fails the way the offline synthesizer fails on a spec it cannot use."""

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        raise InvalidSpecError("Model has no __init__ to mirror")


class BrokenJudge(FakeJudge):
    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False) -> Verdict:
        raise ConfigError("judge cannot start: evaluator.run_timeout_s is 0")


class FailingSearch(SearchService):
    """The search's own handler fails permanently on the third evaluation."""

    async def _on_evaluation(self, msg: ev.EvaluationCompleted) -> None:
        if msg.result.candidate_id == "r3-1":
            raise NotFoundError("no node r3-1 in the search tree")
        await super()._on_evaluation(msg)


class BrokenKnowledgeBase:
    """Every skill operation fails permanently (the service looks skills up before it adds one)."""

    async def add_skill(self, skill: object) -> None:
        raise InvalidArgumentError("skill title is empty")

    async def find_skill(self, skill_id: str) -> None:
        raise InvalidArgumentError("skill title is empty")

    async def list_skills(self, *args: object, **kw: object) -> list[object]:
        raise InvalidArgumentError("skill title is empty")


async def _system(bus: object, failing: str) -> tuple[MemoryStore, GatewayService]:
    store = MemoryStore()
    search_cls = FailingSearch if failing == "search" else SearchService
    await search_cls(bus, store, S).subscribe()  # type: ignore[arg-type]
    synth = NoInitSynthesizer() if failing == "synthesizer" else FakeSynthesizer()
    await SynthesizerService(bus, store, S, synth).subscribe()  # type: ignore[arg-type]
    judge = BrokenJudge() if failing == "evaluator" else FakeJudge()
    await EvaluatorService(bus, store, S, judge, "cpu").subscribe()  # type: ignore[arg-type]
    if failing == "knowledge":
        await KnowledgeService(bus, S, BrokenKnowledgeBase()).subscribe()  # type: ignore[arg-type]
    gw = GatewayService(bus, store, S, JudgeValidator(FakeJudge()), SearchSettings(),  # type: ignore[arg-type]
                        "sessions/{session_id}/", "cpu")
    return store, gw


EXPECTED = {
    "synthesizer": ("synthesizer: InvalidSpecError: Model has no __init__ to mirror", True),
    "evaluator": ("evaluator: ConfigError: judge cannot start: evaluator.run_timeout_s is 0", False),
    "search": ("search: NotFoundError: no node r3-1 in the search tree", False),
    "knowledge": ("knowledge: InvalidArgumentError: skill title is empty", True),
}


@pytest.mark.parametrize("failing", sorted(EXPECTED))
async def test_permanent_handler_failure_ends_the_session(bus: object, failing: str) -> None:
    store, gw = await _system(bus, failing)
    session = await gw.start_session(spb.StartSessionRequest(spec=SPEC, budget=8, max_inflight=1))
    sid = session.session_id

    async def follow() -> list[ev.Envelope]:
        return [env async for env in gw.watch(sid)]

    events = await asyncio.wait_for(follow(), 20)  # the watch ends: nobody waits forever
    kinds = [e.WhichOneof("payload") for e in events]
    reason, bad_input = EXPECTED[failing]
    assert kinds[-1] == "session_completed"
    failed = [e.session_failed for e in events if e.WhichOneof("payload") == "session_failed"]
    assert failed and failed[0].service == failing and failed[0].reason == reason
    done = events[-1].session_completed.session
    assert done.status == pb.SESSION_STATUS_FAILED and done.error == reason and done.bad_input == bad_input
    final = await gw.get_session(sid)
    assert final.status == pb.SESSION_STATUS_FAILED and final.error == reason
    summary = json.loads(await store.get(f"{final.artifact_prefix}summary.json"))
    assert summary["status"] == "SESSION_STATUS_FAILED" and summary["error"] == reason
    if failing in ("search", "knowledge"):
        # Correct candidates came before the failure: the best so far is still reported.
        assert final.best_candidate_id and final.best_speedup > 0
        assert (await store.get(f"{final.artifact_prefix}best_kernel.py")).startswith(b"# KernelEvolve best")
    else:
        assert not final.best_candidate_id and done.evaluated == 0


async def test_failure_of_a_failure_report_is_not_reported_again(bus: object) -> None:
    """A handler failing on SessionFailed itself must not feed an endless loop of reports."""
    seen: list[str] = []

    async def handler(env: ev.Envelope) -> None:
        seen.append(env.WhichOneof("payload") or "")
        raise InvalidSpecError("cannot handle this")

    await bus.consume("ke.*.session.>", "search-failed", handler)  # type: ignore[attr-defined]
    await bus.consume("ke.*.request.synth", "synthesizer", handler)  # type: ignore[attr-defined]
    req = ev.CandidateRequested(session_id="s1", request_id="r1", count=1)
    await bus.publish(S.request("s1"), envelope("s1", candidate_requested=req))  # type: ignore[attr-defined]
    for _ in range(200):
        if "session_failed" in seen:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)
    assert seen.count("candidate_requested") == 1  # terminated, not redelivered
    assert seen.count("session_failed") == 1  # reported once; its own failure is only logged


async def test_retryable_failure_does_not_end_the_session(bus: object) -> None:
    calls: list[str] = []
    reports: list[ev.Envelope] = []

    async def flaky(env: ev.Envelope) -> None:
        calls.append(env.event_id)
        if len(calls) == 1:
            raise IndexUnavailable("qdrant restarting")

    async def on_failed(env: ev.Envelope) -> None:
        reports.append(env)

    await bus.consume("ke.*.request.synth", "synthesizer", flaky)  # type: ignore[attr-defined]
    await bus.consume(S.failed(), "watch-failed", on_failed)  # type: ignore[attr-defined]
    req = ev.CandidateRequested(session_id="s1", request_id="r1", count=1)
    await bus.publish(S.request("s1"), envelope("s1", candidate_requested=req))  # type: ignore[attr-defined]
    for _ in range(400):
        if len(calls) >= 2:
            break
        await asyncio.sleep(0.02)
    assert len(calls) == 2 and not reports
