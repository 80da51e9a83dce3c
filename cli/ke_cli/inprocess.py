"""A whole search session run by the product's own services inside this process, over
the in-memory bus and object store: the synchronous driver for benchmarks and tests.

There is one search loop, the search service's. This module only composes it
(``ke_cli.stack.build_stack`` with the memory bus and store, the synthesizer and judge
injected) and reads the result back through the gateway, so a benchmark's "best" is
chosen and re-timed exactly as a user's session chooses it.
No nats-server, object-store server or vector index is needed: only gRPC on loopback
(the gateway validates the spec through the evaluator's RPC, as deployed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import Settings
from kernelevolve.errors import NotFoundError
from kernelevolve.ports.judge import JudgePort
from kernelevolve.ports.knowledge import NoKnowledge
from kernelevolve.ports.synthesis import CandidateSynthesizer, Proposal, Transformation
from kernelevolve.ports.verdict import Verdict
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb


@dataclass
class CandidateRecord:
    """One judged candidate of the session, as the lineage and the reports hold it."""

    node: pb.Node
    proposal: Proposal
    verdict: Verdict


@dataclass
class SessionResult:
    session: pb.Session
    candidates: list[CandidateRecord] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""  # why the session ended before its budget ("" = budget spent or space exhausted)
    retimes: dict[str, Verdict] = field(default_factory=dict)  # candidate id -> the finalist's re-timing
    lineage: dict[str, Any] = field(default_factory=dict)  # lineage.json (twins included, as duplicates)
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json (end reason, notes, options)

    @property
    def best(self) -> CandidateRecord | None:
        """The session's best: the finalist the search service re-timed and reported."""
        by_id = {c.node.node_id: c for c in self.candidates}
        return by_id.get(self.session.best_candidate_id)


async def run_session(spec_source: str, spec_name: str, *, synthesizer: CandidateSynthesizer, judge: JudgePort,
                      budget: int, strategy: str = "greedy", max_inflight: int = 1, hardware_kind: str = "cpu",
                      time_limit_s: float | None = None, settings: Settings | None = None, seeds: int = 0,
                      plateau: int = 0, target_roofline: float = 0.0, baseline: str = "",
                      tune_share: float | None = None, tune_elite: int | None = None,
                      knowledge_path: str = "", precision: str = "") -> SessionResult:
    """Run one session to its end. ``max_inflight`` candidates are in flight at once (and as
    many evaluations run together when the judge has workers for them); ``time_limit_s`` is
    the session's wall-clock budget (the search service ends it with its best verified
    kernel; should it not end within a grace period after, it is cancelled). ``seeds``,
    ``plateau``, ``target_roofline``, ``baseline``, ``tune_share`` and ``tune_elite`` are the
    session's search options (None: the settings' default); ``precision`` its contract
    (``kernelevolve.precision``; empty: the settings' default).
    ``knowledge_path``: a knowledge folder (Qdrant local) the session learns from and into;
    empty = no knowledge service, and no skill priors."""
    from ke_cli.stack import build_stack

    base = settings or Settings()
    started = time.perf_counter()
    settings = replace(base, evaluator=replace(base.evaluator, hardware_kind=hardware_kind,
                                               parallel_workers=max(1, max_inflight)))
    # Without a knowledge folder no knowledge service runs: nothing is retrieved.
    knowledge = None if knowledge_path else NoKnowledge()
    if knowledge_path:
        settings = replace(settings, knowledge=replace(settings.knowledge, path=knowledge_path, url=""))
    bus, store = MemoryBus(), MemoryStore()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        gateway = (await build_stack(settings, stack, bus=bus, store=store, judge=judge, synthesizer=synthesizer,
                                     knowledge=knowledge)).gateway.service
        session = await gateway.start_session(spb.StartSessionRequest(
            spec=make_spec(spec_name, spec_source), budget=budget, strategy=strategy, max_inflight=max_inflight,
            hardware_kind=hardware_kind, seeds=seeds, time_limit_s=time_limit_s or 0.0, plateau=plateau,
            target_roofline=target_roofline, baseline=baseline, tune_share=tune_share, tune_elite=tune_elite,
            precision=precision))
        sid = session.session_id
        grace = None if time_limit_s is None else time_limit_s + _GRACE_S
        stopped = await _follow(gateway, sid, grace)
        final = await gateway.get_session(sid)
        if final.end_reason.startswith("time limit"):
            stopped = final.end_reason
        result = SessionResult(final, stopped=stopped)
        art = Artifacts(final.artifact_prefix)
        for node in sorted(await gateway.list_nodes(sid), key=lambda n: n.node_id):
            if not node.evaluated:
                continue
            got = await gateway.get_candidate(sid, node.node_id)
            result.candidates.append(CandidateRecord(node, _proposal(got), _verdict(got.report_json)))
            with contextlib.suppress(NotFoundError):  # only finalists have a re-timing
                result.retimes[node.node_id] = _verdict((await store.get(art.retime_report(node.node_id))).decode())
        with contextlib.suppress(NotFoundError):
            result.lineage = json.loads(await store.get(art.lineage))
            result.summary = json.loads(await store.get(art.summary))
    result.seconds = time.perf_counter() - started
    return result


# How long past its time limit a session may take to re-time its best and finish.
_GRACE_S = 120.0


def run_session_sync(spec_source: str, spec_name: str, **kwargs: Any) -> SessionResult:
    """``run_session`` for callers without an event loop (benchmark scripts)."""
    return asyncio.run(run_session(spec_source, spec_name, **kwargs))


async def _follow(gateway: Any, sid: str, time_limit_s: float | None) -> str:
    async def watch() -> None:
        async for env in gateway.watch(sid):
            if env.WhichOneof("payload") == "session_completed":
                return

    task = asyncio.ensure_future(watch())
    try:
        await asyncio.wait_for(asyncio.shield(task), time_limit_s)
        return ""
    except TimeoutError:
        await gateway.cancel(sid)  # the session ends with the best verified so far
        await task
        return f"time limit of {time_limit_s:g} s"


def _proposal(got: spb.GetCandidateResponse) -> Proposal:
    c = got.candidate
    return Proposal(source=got.source, transformation=Transformation(c.transformation.name,
                                                                     dict(c.transformation.params)),
                    genome=dict(c.genome), fallback_nodes=tuple(c.fallback_nodes), description=c.description)


def _verdict(report_json: str) -> Verdict:
    return Verdict.from_dict(json.loads(report_json)) if report_json else Verdict(status="crashed",
                                                                                  reason="no report stored")
