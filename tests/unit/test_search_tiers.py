"""Screened verdicts in the search (ke_search/tiers.py): provisional until a full verdict;
contenders within noise of the best promoted to the full protocol; the reported best
always judged by the full protocol; each candidate's tier in the report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from ke_cli.inprocess import run_session
from ke_search.service import _best
from ke_search.tiers import contenders, provisional, tier_label, tier_of
from kernelevolve.config import Settings
from kernelevolve.ports.verdict import Verdict
from kernelevolve.report.html import tier_of as report_tier
from kernelevolve.v1 import common_pb2 as pb
from tests.unit.landscape import GridJudge, GridSynthesizer, point_of, smooth

SPEC = ("import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


def _node(nid: str, fit: float, tier: str = "screen", half: float = 0.05, retimed: bool = False,
          status: int = pb.EVALUATION_STATUS_CORRECT) -> pb.Node:
    return pb.Node(node_id=nid, evaluated=True, status=status, fitness=fit, fitness_low=fit - half,
                   fitness_high=fit + half, tier=tier, retimed=retimed)


def test_a_result_without_a_tier_is_full_and_a_screened_node_is_provisional_until_rechecked() -> None:
    assert tier_of(pb.EvaluationResult()) == "full" and tier_of(pb.EvaluationResult(tier="screen")) == "screen"
    assert provisional(_node("a", 1.0)) and not provisional(_node("a", 1.0, retimed=True))
    assert not provisional(_node("a", 1.0, tier="full")) and not provisional(_node("a", 1.0, tier=""))


@pytest.mark.parametrize(("fits", "limit", "expected"), [
    # within noise of the best (2.0 +- 0.05): the best and 1.96; 1.5 is out; 2.2 (full) is the best
    ({"a": 2.0, "b": 1.96, "c": 1.5}, 8, ["a", "b"]),
    ({"a": 2.0, "b": 1.96, "c": 1.5}, 1, ["a"]),
    ({"a": 2.0, "b": 1.96, "c": 1.5}, 0, []),
    ({"a": 1.0}, 8, ["a"]),
])
def test_contenders_are_the_screened_nodes_within_noise_of_the_best(fits: dict[str, float], limit: int,
                                                                     expected: list[str]) -> None:
    nodes = [_node(k, v) for k, v in fits.items()]
    assert contenders(nodes, set(), limit) == expected
    # already requested, failed, full or re-checked: never again
    assert contenders(nodes, set(expected), limit) == [n for n in contenders(nodes, set(), 8)
                                                       if n not in expected][:limit]
    failed = [_node(k, v, status=pb.EVALUATION_STATUS_INCORRECT) for k, v in fits.items()]
    assert contenders(failed, set(), limit) == []
    full_best = [*nodes, _node("f", 2.2, tier="full")]
    assert contenders(full_best, set(), 8) == []  # nothing screened is within 2.2's noise
    # a strategy may ask for one outside the noise
    outside = min(fits, key=fits.__getitem__)
    assert contenders(full_best, set(), 8, asked=[outside]) == [outside]


def test_a_screened_node_is_never_called_best() -> None:
    screened, full = _node("s", 3.0), _node("f", 1.2, tier="full")
    best = _best([screened, full])
    assert best is not None and best.node_id == "f"
    assert _best([screened]) is None and _best([screened], verified_only=True) is None
    rechecked = _node("s", 2.5, retimed=True)
    best = _best([rechecked, full], verified_only=True)
    assert best is not None and best.node_id == "s"


def test_the_report_says_each_candidates_tier() -> None:
    assert report_tier({"evaluated": True, "tier": "screen"}) == "screen (provisional)"
    assert report_tier({"evaluated": True, "tier": "screen", "retimed": True}) == "full"
    assert report_tier({"evaluated": True}) == "full" and report_tier({"evaluated": False}) == ""


@dataclass
class TieredGridJudge(GridJudge):
    """A screen sees a lucky bump on some points (one short timing); the full protocol
    (always asked for by name here) sees the landscape."""

    tiers: list[tuple[str, str]] = field(default_factory=list)

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False, tier: str | None = None) -> Verdict:
        assert tier in ("screen", "full"), tier  # a screening evaluator always names the tier
        self.tiers.append((candidate_id, tier))
        v = super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker=tier == "full")
        v.tier = tier  # type: ignore[assignment]
        return v


@pytest.mark.parametrize("budget", [8, 16])
async def test_a_screening_session_reports_only_full_verdicts(budget: int) -> None:
    f = smooth(10)
    judge = TieredGridJudge(f, noise=0.02, bumps={(x, y): 4.0 for x in range(10) for y in range(0, 10, 2)})
    base = Settings()
    settings = replace(base, evaluator=replace(base.evaluator, screen=True))
    result = await run_session(SPEC, "toy", synthesizer=GridSynthesizer(seed=3), judge=judge, budget=budget,
                               settings=settings)
    first: dict[str, str] = {}
    later: list[str] = []
    for cid, tier in judge.tiers:
        if cid in first:
            later.append(tier)
        first[cid] = first.get(cid, tier)
    assert first and set(first.values()) == {"screen"}  # every candidate screened first
    assert later and set(later) == {"full"}  # every re-check is the full protocol
    best = result.best
    assert best is not None and best.node.retimed and best.node.tier == "full"  # screened, then re-checked
    assert tier_label(best.node) == "full" and all(tier_label(c.node) == "screen" for c in result.candidates
                                                   if provisional(c.node))
    assert result.session.best_speedup == pytest.approx(f(point_of(best.proposal.source)))
    # contenders were promoted during the search, beyond the one finalist
    assert len(result.retimes) >= 2
    provisional_left = [c.node for c in result.candidates if provisional(c.node)]
    assert all(n.node_id != best.node.node_id for n in provisional_left)


@pytest.mark.parametrize("budget", [1, 5])
async def test_a_screening_session_without_finalists_or_promotions_still_ends_on_a_full_verdict(budget: int) -> None:
    f = smooth(10)
    judge = TieredGridJudge(f, noise=0.02)
    base = Settings()
    settings = replace(base, evaluator=replace(base.evaluator, screen=True),
                       search=replace(base.search, finalists=0, max_promotions=0))
    result = await run_session(SPEC, "toy", synthesizer=GridSynthesizer(seed=3), judge=judge, budget=budget,
                               settings=settings)
    best = result.best
    assert best is not None and best.node.retimed and tier_label(best.node) == "full"
    assert [t for _, t in judge.tiers].count("full") == 1  # only the fittest screened node
