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

from kernelevolve import metrics
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope, now_ts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_node, load_candidate, load_session
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.errors import NotFoundError
from kernelevolve.ports.synthesis import (
    AsyncProposer,
    CandidateSynthesizer,
    ParentInfo,
    Proposal,
    ProposalRequest,
    Transformation,
)
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb

log = logging.getLogger(__name__)


def to_request(msg: spb.ProposeRequest) -> ProposalRequest:
    req = msg.request
    parent = None
    if req.parent_id:
        result: dict[str, object] = {}
        if msg.HasField("parent_result"):
            r = msg.parent_result
            result = {
                "status": pb.EvaluationStatus.Name(r.status).removeprefix("EVALUATION_STATUS_").lower(),
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
        )
    return ProposalRequest(
        spec_source=msg.spec.source,
        spec_name=msg.spec.name,
        count=max(1, req.count),
        parent=parent,
        tried=tuple(Transformation(t.name, dict(t.params)) for t in req.tried),
        hardware_kind=req.hardware.kind or "cpu",
        session_id=req.session_id,
        request_id=req.request_id,
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
            cand = pb.Candidate(
                candidate_id=cid, session_id=sid, parent_id=req.parent_id,
                transformation=pb.Transformation(name=prop.transformation.name, params=prop.transformation.params),
                source_key=key, source_sha256=hashlib.sha256(data).hexdigest(), synthesizer=self._synth.name,
                created_at=now_ts(), fallback_nodes=list(prop.fallback_nodes), description=prop.description,
                genome=prop.genome,
            )
            await self._bus.kv_put(Keys.candidate(sid, cid), cand.SerializeToString())
            gen = ev.CandidateGenerated(candidate=cand, hardware=pb.HardwareTarget(kind=hw),
                                        request_id=req.request_id)
            await self._bus.publish(self._subjects.candidate(sid, hw), envelope(sid, candidate_generated=gen),
                                    dedup_id=f"gen-{sid}-{cid}")
            metrics.CANDIDATES_GENERATED.labels(hw).inc()
            log.info("candidate generated", extra={"session_id": sid, "candidate_id": cid,
                                                   "parent_id": req.parent_id,
                                                   "transformation": prop.transformation.name})
        if len(proposals) < req.count:
            ex = ev.CandidateRequestExhausted(
                session_id=sid, request_id=req.request_id, parent_id=req.parent_id,
                reason=f"{self._synth.name} synthesizer offered {len(proposals)} of {req.count} candidates"
                       + self._shortfall(sid, req.request_id))
            await self._bus.publish(self._subjects.exhausted(sid), envelope(sid, candidate_request_exhausted=ex),
                                    dedup_id=f"exh-{sid}-{req.request_id}")

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
                    report = json.loads(await self._store.get(n.report_key))
                    msg.parent_result.CopyFrom(pb.EvaluationResult(
                        candidate_id=parent_id, status=n.status, speedup=n.fitness,
                        reason=str(report.get("reason", ""))))
                    _add_timing_and_diagnosis(msg.parent_result, report)
                except NotFoundError:
                    pass


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
