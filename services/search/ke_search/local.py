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
) -> LocalResult:
    strat = make_strategy(strategy)
    result = LocalResult(spec_name)
    by_id: dict[str, LocalCandidate] = {}
    exhausted: set[str] = set()
    start = time.perf_counter()
    request = 0
    while len(result.candidates) < budget:
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
        proposals = synthesizer.propose(ProposalRequest(spec_source=spec_source, spec_name=spec_name, count=1,
                                                        parent=parent, tried=tried, hardware_kind=hardware_kind))
        if not proposals:
            exhausted.add(parent_id)
            continue
        prop = proposals[0]
        cid = f"r{request}-1"
        verdict = judge.evaluate(spec_source, prop.source, cid)
        res = verdict_to_pb(verdict, hardware_kind)
        depth = by_id[parent_id].node.depth + 1 if parent_id != ROOT else 0
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
