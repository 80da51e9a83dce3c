"""A synchronous search driver: the same strategies as the search service, calling a
synthesizer and a judge directly instead of through the bus.

Used where the service stack is not deployed, e.g. benchmark runs on a GPU host that
has only torch, triton and protobuf. The service (``service.py``) remains the product
path; both pick parents with the same ``Strategy`` objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ke_evaluator.convert import JudgePort, verdict_to_pb
from ke_evaluator.verdict import Verdict
from ke_search.strategy import ROOT, make_strategy
from ke_synthesizer.api import CandidateSynthesizer, ParentInfo, Proposal, ProposalRequest, Transformation
from kernelevolve.v1 import common_pb2 as pb

log = logging.getLogger(__name__)


@dataclass
class LocalCandidate:
    node: pb.Node
    proposal: Proposal
    verdict: Verdict


@dataclass
class LocalResult:
    spec_name: str
    candidates: list[LocalCandidate] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""  # why the search ended before the budget ("" = budget spent or space exhausted)

    @property
    def best(self) -> LocalCandidate | None:
        correct = [c for c in self.candidates if c.verdict.status == "correct"]
        return max(correct, key=lambda c: c.verdict.speedup) if correct else None


def run_local_search(
    spec_source: str,
    spec_name: str,
    synthesizer: CandidateSynthesizer,
    judge: JudgePort,
    budget: int,
    *,
    strategy: str = "greedy",
    hardware_kind: str = "nvidia",
    on_candidate: Callable[[LocalCandidate], None] | None = None,
    batch: int = 1,
    time_limit_s: float | None = None,
) -> LocalResult:
    """Search until ``budget`` candidates are judged. ``batch`` > 1 asks for that many
    children of each chosen parent at once and judges them together (``evaluate_many``,
    parallel when the judge has several workers); the parent choice then lags by one
    batch, as it does in the service with several evaluators. ``time_limit_s``: start no
    new batch after this many seconds (``stopped`` says so)."""
    strat = make_strategy(strategy)
    result = LocalResult(spec_name)
    by_id: dict[str, LocalCandidate] = {}
    exhausted: set[str] = set()
    start = time.perf_counter()
    request = 0
    while len(result.candidates) < budget:
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            result.stopped = f"time limit of {time_limit_s:g} s after {len(result.candidates)} candidates"
            break
        nodes = [c.node for c in result.candidates]
        parent_id = strat.select_parent(nodes, exhausted)
        if parent_id is None:
            break
        request += 1
        parent = None
        if parent_id != ROOT:
            pc = by_id[parent_id]
            parent = ParentInfo(candidate_id=parent_id, source=pc.proposal.source,
                                transformation=pc.proposal.transformation, genome=dict(pc.proposal.genome),
                                result={"status": pc.verdict.status, "speedup": pc.verdict.speedup,
                                        "bound": pc.verdict.diagnosis.bound if pc.verdict.diagnosis else "unknown"})
        tried = tuple(Transformation(n.transformation.name, dict(n.transformation.params))
                      for n in nodes if n.parent_id == parent_id)
        count = max(1, min(batch, budget - len(result.candidates)))
        proposals = synthesizer.propose(ProposalRequest(spec_source=spec_source, spec_name=spec_name, count=count,
                                                        parent=parent, tried=tried, hardware_kind=hardware_kind))
        if not proposals:
            exhausted.add(parent_id)
            continue
        ids = [f"r{request}-{i + 1}" for i in range(len(proposals))]
        many = getattr(judge, "evaluate_many", None)
        if len(proposals) > 1 and many is not None:
            verdicts = many([(spec_source, p.source, cid) for p, cid in zip(proposals, ids, strict=True)])
        else:
            verdicts = [judge.evaluate(spec_source, p.source, cid) for p, cid in zip(proposals, ids, strict=True)]
        depth = by_id[parent_id].node.depth + 1 if parent_id != ROOT else 0
        for prop, cid, verdict in zip(proposals, ids, verdicts, strict=True):
            res = verdict_to_pb(verdict, hardware_kind)
            node = pb.Node(node_id=cid, parent_id=parent_id, depth=depth, evaluated=True, status=res.status,
                           fitness=verdict.speedup if verdict.status == "correct" else 0.0,
                           transformation=pb.Transformation(name=prop.transformation.name,
                                                            params=prop.transformation.params),
                           reason=verdict.reason[:500])
            cand = LocalCandidate(node, prop, verdict)
            by_id[cid] = cand
            result.candidates.append(cand)
            if on_candidate:
                on_candidate(cand)
    result.seconds = time.perf_counter() - start
    return result
