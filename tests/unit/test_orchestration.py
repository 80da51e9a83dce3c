"""The search → synthesizer → evaluator loop through the real services, built as every
stack is (``ke_cli.stack.build_stack``) with the bus, store, synthesizer and judge
replaced by doubles (fast: gRPC on loopback, no other server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import replace

import pytest

from ke_cli.stack import build_stack
from ke_gateway.service import GatewayService
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import Settings
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError, NotFoundError
from kernelevolve.ports.knowledge import NoKnowledge
from kernelevolve.ports.verdict import Verdict
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from tests.unit.fakes import FakeJudge, FakeSynthesizer

SPEC = make_spec("toy", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as services:
        yield services


async def _system(stack: AsyncExitStack, synth: FakeSynthesizer, judge: FakeJudge, finalists: int = 1,
                  bus: MemoryBus | None = None, screen: bool | None = None
                  ) -> tuple[MemoryBus, MemoryStore, GatewayService]:
    bus, store = bus or MemoryBus(redeliver_delay_s=0.01), MemoryStore()
    stack.push_async_callback(bus.close)  # after the services stop
    base = Settings()
    settings = replace(base, search=replace(base.search, finalists=finalists))
    if screen is not None:  # None: the settings' default (screening on)
        settings = replace(settings, evaluator=replace(settings.evaluator, screen=screen))
    built = await build_stack(settings, stack, bus=bus, store=store, judge=judge, synthesizer=synth,
                              knowledge=NoKnowledge())
    return bus, store, built.gateway.service


async def _run(gw: GatewayService, **kw: object) -> tuple[pb.Session, list]:
    session = await gw.start_session(spb.StartSessionRequest(spec=SPEC, **kw))
    events = []

    async def follow() -> None:
        async for env in gw.watch(session.session_id):
            events.append(env)

    await asyncio.wait_for(follow(), 20)
    return await gw.get_session(session.session_id), events


@pytest.mark.parametrize(("budget", "inflight"), [(1, 1), (5, 2), (8, 3)])
async def test_greedy_session_spends_exact_budget_and_climbs(budget: int, inflight: int, stack: AsyncExitStack) -> None:
    bus, store, gw = await _system(stack, FakeSynthesizer(), judge := FakeJudge())
    final, events = await _run(gw, budget=budget, max_inflight=inflight)
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds.count("candidate_generated") == budget
    assert kinds.count("evaluation_completed") == budget
    assert kinds[-1] == "session_completed"
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == budget
    generated = [e.candidate_generated.candidate.candidate_id for e in events
                 if e.WhichOneof("payload") == "candidate_generated"]
    retimed = [e.candidate_retimed.result.candidate_id for e in events
               if e.WhichOneof("payload") == "candidate_retimed"]
    assert sorted(judge.evaluated) == sorted(generated + retimed)  # each once, a re-checked one once more
    # Screening is the default: each candidate is screened, the contenders (here each new
    # best so far) are re-checked by the full protocol, and the best is one of them.
    assert len(set(retimed)) == len(retimed) and final.best_candidate_id in retimed
    nodes = await gw.list_nodes(final.session_id)
    best = max(nodes, key=lambda n: n.fitness)
    assert final.best_speedup == pytest.approx(best.fitness)
    assert {n.node_id: n.fitness for n in nodes}[final.best_candidate_id] == pytest.approx(best.fitness)
    if budget > 3:  # greedy expanded the best node: some node has a parent that is itself a candidate
        assert any(n.parent_id for n in nodes)
        assert best.depth >= 1
    prefix = final.artifact_prefix
    lineage = json.loads(await store.get(f"{prefix}lineage.json"))
    assert len(lineage["nodes"]) == budget
    summary = json.loads(await store.get(f"{prefix}summary.json"))
    assert summary["best_tier"] == "full" and summary["best_retimed"]  # screened first, reported on its full verdict
    assert (await store.get(f"{prefix}best_kernel.py")).startswith(b"# KernelEvolve best candidate")
    assert len(await store.list(f"{prefix}reports/")) == budget


async def test_incorrect_seeds_are_recorded_and_search_recovers(stack: AsyncExitStack) -> None:
    bus, store, gw = await _system(stack, FakeSynthesizer(bad_seeds=1), FakeJudge())
    final, _ = await _run(gw, budget=6, max_inflight=1)
    nodes = await gw.list_nodes(final.session_id)
    statuses = {n.node_id: n.status for n in nodes}
    assert pb.EVALUATION_STATUS_INCORRECT in statuses.values()
    assert final.best_candidate_id and statuses[final.best_candidate_id] == pb.EVALUATION_STATUS_CORRECT


async def test_exhausted_synthesizer_ends_session_early(stack: AsyncExitStack) -> None:
    # One child per parent and a capped block size: the space runs out before the budget.
    synth = FakeSynthesizer(max_children=1, max_block=1024)
    bus, store, gw = await _system(stack, synth, FakeJudge())
    final, events = await _run(gw, budget=50, max_inflight=1)
    assert final.status == pb.SESSION_STATUS_COMPLETED
    assert 0 < final.evaluated < 50


async def test_cancel_completes_session_as_cancelled(stack: AsyncExitStack) -> None:
    bus, store, gw = await _system(stack, FakeSynthesizer(), FakeJudge())
    session = await gw.start_session(spb.StartSessionRequest(spec=SPEC, budget=1000, max_inflight=1))
    await gw.cancel(session.session_id)
    async for env in gw.watch(session.session_id):
        if env.WhichOneof("payload") == "session_completed":
            break
    final = await gw.get_session(session.session_id)
    assert final.status == pb.SESSION_STATUS_CANCELLED


@pytest.mark.parametrize(
    ("request_kw", "error"),
    [
        ({"spec": pb.OperatorSpec(name="x", source="")}, InvalidSpecError),
        ({"spec": pb.OperatorSpec(name="x", source="def (:")}, InvalidSpecError),
        ({"spec": pb.OperatorSpec(name="x", source="class Model: pass\n")}, InvalidSpecError),
        ({"spec": SPEC, "budget": -3}, InvalidArgumentError),
        ({"spec": SPEC, "strategy": "simulated-annealing"}, InvalidArgumentError),
        ({"spec": SPEC, "session_id": "bad id!"}, InvalidArgumentError),
        ({"spec": pb.OperatorSpec(name="../etc", source=SPEC.source)}, InvalidArgumentError),
    ],
)
async def test_gateway_rejects_bad_requests(request_kw: dict, error: type[Exception], stack: AsyncExitStack) -> None:
    bus, store, gw = await _system(stack, FakeSynthesizer(), FakeJudge())
    with pytest.raises(error):
        await gw.start_session(spb.StartSessionRequest(**request_kw))


async def test_reference_that_raises_is_invalid_spec_and_nothing_is_stored(stack: AsyncExitStack) -> None:
    bus, store, gw = await _system(stack, FakeSynthesizer(), FakeJudge(spec_ok=False))
    with pytest.raises(InvalidSpecError, match="reference raised"):
        await gw.start_session(spb.StartSessionRequest(spec=SPEC, session_id="s1"))
    assert await store.list("") == []
    with pytest.raises(NotFoundError):
        await gw.get_session("s1")


class NoisyJudge(FakeJudge):
    """The first evaluation of block 512 is a lucky outlier; in a fresh worker it is ordinary."""

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, tier: str | None = None) -> Verdict:
        v = super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker, tier=tier)
        if "block=512" in candidate_source and v.is_correct and not fresh_worker:
            v.speedup *= 10  # noise made an elite
        return v


@pytest.mark.parametrize(("finalists", "screen"), [(0, False), (0, True), (1, False), (1, True), (2, True)])
async def test_finalists_are_retimed_before_one_is_called_best(finalists: int, screen: bool,
                                                               stack: AsyncExitStack) -> None:
    judge = NoisyJudge()
    bus, store, gw = await _system(stack, FakeSynthesizer(max_children=3, max_block=1024), judge,
                                   finalists=finalists, screen=screen)
    final, events = await _run(gw, budget=7, max_inflight=1)
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds.count("candidate_generated") == kinds.count("evaluation_completed") == 7
    nodes = {n.node_id: n for n in await gw.list_nodes(final.session_id)}
    lucky = [n for n in nodes.values() if "512" in n.transformation.params.get("block", "")]
    assert lucky
    if finalists == 0 and not screen:  # an evaluator that does not screen judges fully at once
        assert kinds.count("retime_requested") == 0
        assert final.best_candidate_id == lucky[0].node_id  # the outlier wins unchecked
        return
    assert kinds.count("retime_requested") == kinds.count("candidate_retimed") >= 1
    best = nodes[final.best_candidate_id]
    # Whatever is called best was confirmed in a fresh worker; with screening even when no
    # finalists are asked for (the lucky screen is a contender, promoted to the full protocol).
    assert best.retimed
    assert lucky[0].retimed and lucky[0].first_fitness == pytest.approx(10 * lucky[0].fitness)
    assert final.best_speedup == pytest.approx(best.fitness)
    assert kinds.index("session_completed") > max(i for i, k in enumerate(kinds) if k == "candidate_retimed")


class FlakyBus(MemoryBus):
    """Fails the first publish of each listed kind, as a crash right after a commit would."""

    def __init__(self, fail_kinds: set[str]) -> None:
        super().__init__(redeliver_delay_s=0.01)
        self.fail_kinds = set(fail_kinds)

    async def publish(self, subject, envelope, dedup_id=None):  # type: ignore[no-untyped-def]
        kind = envelope.WhichOneof("payload")
        if kind in self.fail_kinds:
            self.fail_kinds.discard(kind)
            raise RuntimeError(f"connection lost while publishing {kind}")
        return await super().publish(subject, envelope, dedup_id)


@pytest.mark.parametrize("kind", ["candidate_requested", "retime_requested"])
async def test_effects_survive_a_failure_after_commit(kind: str, stack: AsyncExitStack) -> None:
    flaky = FlakyBus({kind})
    _, _, gw = await _system(stack, FakeSynthesizer(), FakeJudge(), bus=flaky)
    final, events = await _run(gw, budget=4, max_inflight=1)
    assert not flaky.fail_kinds  # the failure happened
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == 4
