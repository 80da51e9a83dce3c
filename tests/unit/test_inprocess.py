"""The synchronous driver runs the product's own services in this process: the budget is
spent by the search service, the best is the finalist it re-timed, in-flight candidates
are judged together, and a time limit still ends the session with its best."""

from __future__ import annotations

import time

import pytest

from ke_cli.inprocess import run_session
from kernelevolve.ports.verdict import Verdict
from kernelevolve.v1 import common_pb2 as pb
from tests.unit.fakes import CountsInFlight, FakeJudge, FakeSynthesizer

SPEC = ("import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


@pytest.mark.parametrize("budget", [1, 4, 9])
async def test_session_spends_its_budget_and_reports_the_retimed_best(budget: int) -> None:
    judge = FakeJudge()
    result = await run_session(SPEC, "toy", synthesizer=FakeSynthesizer(), judge=judge, budget=budget)
    assert len(result.candidates) == budget
    assert result.session.status == pb.SESSION_STATUS_COMPLETED and result.stopped == ""
    best = result.best
    assert best is not None and best.node.node_id == result.session.best_candidate_id
    assert best.verdict.speedup == max(c.verdict.speedup for c in result.candidates)
    # Screening is the default: every candidate is screened first, and the contenders (each
    # new best-so-far here) are judged again by the full protocol; the best is one of them.
    assert best.node.node_id in result.retimes and best.node.tier == "full"  # never called best on a screen
    assert all(judge.evaluated.count(cid) == 2 for cid in result.retimes)
    if budget > 3:
        assert best.node.depth >= 1  # greedy expanded a correct node
    assert all(c.proposal.source.startswith("# block=") for c in result.candidates)


async def test_inflight_candidates_are_judged_together() -> None:
    class CountingJudge(CountsInFlight, FakeJudge):
        hold_s = 0.05

    judge = CountingJudge()
    result = await run_session(SPEC, "toy", synthesizer=FakeSynthesizer(max_children=3, max_block=1 << 20),
                               judge=judge, budget=6, max_inflight=3)
    assert len(result.candidates) == 6 and len({c.node.node_id for c in result.candidates}) == 6
    assert judge.most >= 2


async def test_session_ends_early_when_the_space_is_exhausted() -> None:
    result = await run_session(SPEC, "toy", synthesizer=FakeSynthesizer(max_children=1, max_block=1024),
                               judge=FakeJudge(), budget=50)
    assert 0 < len(result.candidates) < 50 and result.best is not None


async def test_a_time_limit_ends_the_session_with_its_best() -> None:
    class SlowJudge(FakeJudge):
        def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                     fresh_worker: bool = False, tier: str | None = None) -> Verdict:
            time.sleep(0.1)
            return super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker)

    result = await run_session(SPEC, "toy", synthesizer=FakeSynthesizer(max_children=3, max_block=1 << 20),
                               judge=SlowJudge(), budget=200, time_limit_s=0.5)
    assert result.stopped == "time limit of 0.5 s" == result.session.end_reason
    assert result.session.status == pb.SESSION_STATUS_COMPLETED
    assert 1 <= len(result.candidates) < 200
    assert result.best is not None and result.best.verdict.status == "correct"
