"""Synthesizer service: turns CandidateRequested into CandidateGenerated.

Translation only: proto ⇄ ``kernelevolve.ports.synthesis`` dataclasses, storage of sources,
publishing. The generating itself is the injected ``CandidateSynthesizer``.
Candidate ids are ``<request_id>-<n>`` and generation is deterministic, so a
redelivered request re-publishes the same candidates, which the bus de-duplicates.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging

from ke_synthesizer.composite import observe, session_usage
from kernelevolve import metrics
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope, now_ts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_node, list_nodes, load_candidate, load_session
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.errors import ConflictError, NotFoundError
from kernelevolve.ports.synthesis import (
    AsyncProposer,
    AttemptSummary,
    CandidateSynthesizer,
    ParentInfo,
    Proposal,
    ProposalRequest,
    Transformation,
)
from kernelevolve.source_hash import source_hash
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb

log = logging.getLogger(__name__)


def status_name(status: int) -> str:
    return pb.EvaluationStatus.Name(status).removeprefix("EVALUATION_STATUS_").lower()


def to_request(msg: spb.ProposeRequest) -> ProposalRequest:
    req = msg.request
    parent = None
    if req.parent_id:
        result: dict[str, object] = {}
        if msg.HasField("parent_result"):
            r = msg.parent_result
            result = {
                "status": status_name(r.status),
                "speedup": r.speedup,
                "reason": r.reason,
                "bound": pb.BoundClass.Name(r.diagnosis.bound).removeprefix("BOUND_CLASS_").lower(),
                "roofline_fraction": r.diagnosis.roofline_fraction,
                "candidate_ms": r.candidate_timing.median_ms,
                "baseline_ms": r.baseline_timing.median_ms,
                "notes": list(r.diagnosis.notes),
            }
        parent = ParentInfo(
            candidate_id=req.parent_id,
            source=msg.parent_source,
            transformation=Transformation(msg.parent_transformation.name, dict(msg.parent_transformation.params)),
            genome=dict(msg.parent_genome),
            result=result,
            report=json.loads(msg.parent_report_json) if msg.parent_report_json else {},
        )
    return ProposalRequest(
        spec_source=msg.spec.source,
        spec_name=msg.spec.name,
        count=max(1, req.count),
        parent=parent,
        tried=tuple(Transformation(t.name, dict(t.params)) for t in req.tried),
        hardware_kind=req.hardware.kind or "cpu",
        session_id=req.session_id,
        repair_attempt=req.repair_attempt,
        siblings=tuple(AttemptSummary(a.candidate_id, Transformation(a.transformation.name,
                                                                     dict(a.transformation.params)),
                                      status_name(a.status), a.speedup, a.reason) for a in msg.siblings),
        request_id=req.request_id,
        tune=req.tune,
        precision=req.precision or "default",
    )


def to_proposal_pb(p: Proposal) -> spb.Proposal:
    return spb.Proposal(
        source=p.source,
        transformation=pb.Transformation(name=p.transformation.name, params=p.transformation.params),
        fallback_nodes=list(p.fallback_nodes),
        description=p.description,
        genome=p.genome,
    )


class SynthesizerService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects,
                 synthesizer: CandidateSynthesizer, concurrency: int = 1) -> None:
        self._bus = bus
        # Requests handled at once; >1 for a synthesizer that waits on answers from outside.
        self._concurrency = concurrency
        self._store = store
        self._subjects = subjects
        self._synth = synthesizer

    async def subscribe(self) -> None:
        # ack_wait from the bus settings: a slow proposal (an LLM call) sends heartbeats.
        await self._bus.consume(self._subjects.request(), "synthesizer", self.on_request,
                                concurrency=self._concurrency)
        if hasattr(self._synth, "observe"):
            # Measured outcomes of our candidates (the LLM synthesizer's model bandit).
            await self._bus.consume(self._subjects.evaluation(), "synthesizer-outcomes", self.on_evaluation)

    async def on_evaluation(self, env: ev.Envelope) -> None:
        result = env.evaluation_completed.result
        try:
            cand = await load_candidate(self._bus, env.session_id, result.candidate_id)
        except NotFoundError:
            return
        if cand.synthesizer == self._synth.name:
            observe(self._synth, dict(cand.genome), status_name(result.status), result.speedup)

    async def propose(self, msg: spb.ProposeRequest) -> list[Proposal]:
        if isinstance(self._synth, AsyncProposer):
            return await self._synth.apropose(to_request(msg))
        return await asyncio.to_thread(self._synth.propose, to_request(msg))

    async def on_request(self, env: ev.Envelope) -> None:
        req = env.candidate_requested
        sid = req.session_id
        session = await self._session(sid)
        log.info("proposing", extra={"session_id": sid, "request_id": req.request_id, "count": req.count,
                                     "parent_id": req.parent_id, "delivery": env.delivery})
        msg = spb.ProposeRequest(spec=session.spec, request=req)
        if req.parent_id:
            await self._attach_parent(msg, sid, req.parent_id)
        proposals = (await self.propose(msg))[: max(1, req.count)]
        art = Artifacts(session.artifact_prefix)
        hw = req.hardware.kind or session.hardware.kind or "cpu"
        for i, prop in enumerate(proposals, start=1):
            cid = f"{req.request_id}-{i}"
            data = prop.source.encode()
            key = art.candidate(cid)
            await self._store.put(key, data, "text/x-python")
            genome = dict(prop.genome)
            if prop.record:
                # So that any kernel traces back to the exact prompt that produced it.
                genome["llm_record"] = art.llm_record(cid)
                await self._store.put(genome["llm_record"], json.dumps(prop.record, indent=1).encode(),
                                      "application/json")
            cand = pb.Candidate(
                candidate_id=cid, session_id=sid, parent_id=req.parent_id,
                transformation=pb.Transformation(name=prop.transformation.name, params=prop.transformation.params),
                source_key=key, source_sha256=hashlib.sha256(data).hexdigest(), synthesizer=self._synth.name,
                created_at=now_ts(), fallback_nodes=list(prop.fallback_nodes), description=prop.description,
                genome=genome, duplicate_of=await self._twin_of(sid, cid, prop.source),
            )
            await self._bus.kv_put(Keys.candidate(sid, cid), cand.SerializeToString())
            if prop.rejected:
                await self._refuse(art, sid, cid, prop.rejected)
                continue
            gen = ev.CandidateGenerated(candidate=cand, hardware=pb.HardwareTarget(kind=hw),
                                        request_id=req.request_id)
            await self._bus.publish(self._subjects.candidate(sid, hw), envelope(sid, candidate_generated=gen),
                                    dedup_id=f"gen-{sid}-{cid}")
            metrics.CANDIDATES_GENERATED.labels(hw).inc()
            log.info("candidate generated", extra={"session_id": sid, "candidate_id": cid,
                                                   "parent_id": req.parent_id,
                                                   "transformation": prop.transformation.name})
        usage = session_usage(self._synth, sid)
        if usage:
            await self._store.put(art.llm_usage, json.dumps(usage, indent=1).encode(), "application/json")
        if len(proposals) < req.count:
            ex = ev.CandidateRequestExhausted(
                session_id=sid, request_id=req.request_id, parent_id=req.parent_id,
                reason=f"{self._synth.name} synthesizer offered {len(proposals)} of {req.count} candidates"
                       + self._shortfall(sid, req.request_id))
            await self._bus.publish(self._subjects.exhausted(sid), envelope(sid, candidate_request_exhausted=ex),
                                    dedup_id=f"exh-{sid}-{req.request_id}")

    async def _refuse(self, art: Artifacts, sid: str, cid: str, reason: str) -> None:
        """A reply refused before evaluation (no code, no ModelNew, static policy): a failed
        node of the lineage with its reason, reported as a compile error without spending
        an evaluation."""
        report = {"status": "compile_error", "reason": reason, "candidate_id": cid,
                  "evidence": {"refused_by": "synthesizer"}}
        await self._store.put(art.report(cid), json.dumps(report, indent=1).encode(), "application/json")
        result = pb.EvaluationResult(candidate_id=cid, status=pb.EVALUATION_STATUS_COMPILE_ERROR, reason=reason,
                                     report_key=art.report(cid))
        done = ev.EvaluationCompleted(session_id=sid, result=result)
        await self._bus.publish(self._subjects.evaluation(sid), envelope(sid, evaluation_completed=done),
                                dedup_id=f"eval-{sid}-{cid}")
        log.info("candidate refused before evaluation", extra={"session_id": sid, "candidate_id": cid,
                                                               "reason": reason[:200]})

    async def _twin_of(self, sid: str, cid: str, source: str) -> str:
        """The earlier candidate with the same normalised source, or "" when this one is
        the first (the KV create is atomic, so replicas agree on who was first)."""
        key = Keys.source_hash(sid, source_hash(source))
        try:
            await self._bus.kv_create(key, cid.encode())
            return ""
        except ConflictError:
            entry = await self._bus.kv_get(key)
            first = entry.value.decode() if entry is not None else cid
            return "" if first == cid else first  # a replay of our own request is no twin

    def _shortfall(self, sid: str, request_id: str) -> str:
        """Why, when the synthesizer can say (the agent one: a request nobody answered)."""
        explain = getattr(self._synth, "shortfall", None)
        reason = explain(sid, request_id) if callable(explain) else ""
        return f": {reason}" if reason else ""

    async def _session(self, sid: str) -> pb.Session:
        return await load_session(self._bus, sid)

    async def _attach_parent(self, msg: spb.ProposeRequest, sid: str, parent_id: str) -> None:
        cand = await load_candidate(self._bus, sid, parent_id)
        msg.parent_source = (await self._store.get(cand.source_key)).decode()
        msg.parent_transformation.CopyFrom(cand.transformation)
        msg.parent_genome.update(cand.genome)
        n = await get_node(self._bus, sid, parent_id)
        if n is not None:
            if n.report_key:
                try:
                    raw = await self._store.get(n.report_key)
                    report = json.loads(raw)
                    msg.parent_result.CopyFrom(pb.EvaluationResult(
                        candidate_id=parent_id, status=n.status, speedup=n.fitness,
                        reason=str(report.get("reason", ""))))
                    msg.parent_report_json = raw.decode()
                    _add_timing_and_diagnosis(msg.parent_result, report)
                except NotFoundError:
                    pass
        for s in await list_nodes(self._bus, sid):
            if s.parent_id == parent_id and s.evaluated:
                msg.siblings.append(spb.AttemptSummary(candidate_id=s.node_id, transformation=s.transformation,
                                                       status=s.status, speedup=s.fitness, reason=s.reason[:300]))


def _add_timing_and_diagnosis(result: pb.EvaluationResult, report: dict[str, object]) -> None:
    """What a synthesizer that writes prompts tells of the parent: its timings and diagnosis."""
    for key, field in (("candidate_timing", result.candidate_timing), ("baseline_timing", result.baseline_timing)):
        timing = report.get(key)
        if isinstance(timing, dict) and timing.get("median_ms"):
            field.median_ms = float(timing["median_ms"])
    diag = report.get("diagnosis")
    if isinstance(diag, dict):
        bound = f"BOUND_CLASS_{str(diag.get('bound', '')).upper()}"
        if bound in pb.BoundClass.keys():
            result.diagnosis.bound = pb.BoundClass.Value(bound)
        result.diagnosis.roofline_fraction = float(diag.get("roofline_fraction") or 0.0)
        result.diagnosis.notes.extend(str(n) for n in diag.get("notes") or [])
