"""Evaluator service: consumes CandidateGenerated for its hardware kind from a durable
work queue, judges each candidate with the ``Judge`` (sandboxed workers) and publishes
EvaluationCompleted. Translation and I/O only; verdicts come from ``judge.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Protocol

from ke_evaluator.verdict import SpecCheck, Verdict
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.errors import NotFoundError
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

_STATUS = {
    "correct": pb.EVALUATION_STATUS_CORRECT,
    "incorrect": pb.EVALUATION_STATUS_INCORRECT,
    "rejected": pb.EVALUATION_STATUS_REJECTED,
    "compile_error": pb.EVALUATION_STATUS_COMPILE_ERROR,
    "runtime_error": pb.EVALUATION_STATUS_RUNTIME_ERROR,
    "timeout": pb.EVALUATION_STATUS_TIMEOUT,
    "crashed": pb.EVALUATION_STATUS_CRASHED,
}
_BOUND = {"memory": pb.BOUND_CLASS_MEMORY, "compute": pb.BOUND_CLASS_COMPUTE, "latency": pb.BOUND_CLASS_LATENCY}


class JudgePort(Protocol):
    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck: ...

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "") -> Verdict: ...


def verdict_to_pb(v: Verdict, hardware_kind: str, report_key: str = "") -> pb.EvaluationResult:
    res = pb.EvaluationResult(
        candidate_id=v.candidate_id, status=_STATUS[v.status], reason=v.reason, speedup=v.speedup,
        report_key=report_key, hardware=pb.HardwareTarget(kind=hardware_kind, name=v.device),
        fingerprint={k: str(x) for k, x in v.fingerprint.items()}, interpreted=v.interpreted,
        warnings=list(v.warnings),
    )
    if v.correctness is not None:
        c = v.correctness
        res.correctness.CopyFrom(pb.CorrectnessStats(trials=c.trials, max_abs_error=c.max_abs_error,
                                                     max_rel_error=c.max_rel_error, atol=c.atol, rtol=c.rtol))
    for name in ("candidate_timing", "baseline_timing"):
        t = getattr(v, name)
        if t is not None:
            getattr(res, name).CopyFrom(pb.TimingStats(median_ms=t.median_ms, iqr_ms=t.iqr_ms,
                                                       ci_low_ms=t.ci_low_ms, ci_high_ms=t.ci_high_ms,
                                                       trials=t.trials, min_ms=t.min_ms))
    if v.diagnosis is not None:
        d = v.diagnosis
        res.diagnosis.CopyFrom(pb.Diagnosis(
            bound=_BOUND.get(d.bound, pb.BOUND_CLASS_UNSPECIFIED), bytes_moved=d.bytes_moved, flops=d.flops,
            achieved_gbps=d.achieved_gbps, achieved_gflops=d.achieved_gflops,
            roofline_fraction=d.roofline_fraction, library_time_fraction=d.library_time_fraction,
            kernels=[pb.KernelStat(name=k.name, launches=k.launches, time_ms=k.time_ms, registers=k.registers,
                                   shared_bytes=k.shared_bytes, spills=k.spills) for k in d.kernels],
            notes=list(d.notes)))
    return res


class EvaluatorService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects, judge: JudgePort,
                 hardware_kind: str) -> None:
        self._bus = bus
        self._store = store
        self._subjects = subjects
        self._judge = judge
        self.hardware_kind = hardware_kind
        # One judge, one GPU: evaluations are serialised here so timings do not overlap.
        self._lock = asyncio.Lock()
        self._specs: dict[str, pb.Session] = {}

    async def subscribe(self) -> None:
        # Shared durable per hardware kind: evaluators of one kind split the work queue.
        await self._bus.consume(self._subjects.candidate(hardware=self.hardware_kind),
                                f"evaluator-{self.hardware_kind}", self.on_candidate, ack_wait_s=60.0,
                                max_deliver=3)

    async def validate_spec(self, spec: pb.OperatorSpec) -> SpecCheck:
        async with self._lock:
            return await asyncio.to_thread(self._judge.validate_spec, spec.source, spec.name)

    async def evaluate(self, spec: pb.OperatorSpec, source: str, candidate_id: str) -> Verdict:
        async with self._lock:
            return await asyncio.to_thread(self._judge.evaluate, spec.source, source, candidate_id)

    async def on_candidate(self, env: ev.Envelope) -> None:
        cand = env.candidate_generated.candidate
        sid, cid = cand.session_id, cand.candidate_id
        session = await self._session(sid)
        art = Artifacts(session.artifact_prefix)
        report_key = art.report(cid)
        if await self._store.exists(report_key):
            # Redelivered after we wrote the report: publish the same verdict again (deduplicated).
            verdict = Verdict.from_dict(json.loads(await self._store.get(report_key)))
        else:
            source = (await self._store.get(cand.source_key)).decode()
            log.info("evaluating", extra={"session_id": sid, "candidate_id": cid})
            verdict = await self.evaluate(session.spec, source, cid)
            verdict.candidate_id = cid
            await self._store.put(report_key, json.dumps(verdict.to_dict(), indent=2).encode(), "application/json")
        result = verdict_to_pb(verdict, self.hardware_kind, report_key)
        log.info("evaluated", extra={"session_id": sid, "candidate_id": cid, "status": verdict.status,
                                     "speedup": verdict.speedup})
        done = ev.EvaluationCompleted(session_id=sid, result=result)
        await self._bus.publish(self._subjects.evaluation(sid), envelope(sid, evaluation_completed=done),
                                dedup_id=f"eval-{sid}-{cid}")

    async def _session(self, sid: str) -> pb.Session:
        if sid not in self._specs:
            entry = await self._bus.kv_get(Keys.session(sid))
            if entry is None:
                raise NotFoundError(f"unknown session {sid}")
            s = pb.Session()
            s.ParseFromString(entry.value)
            self._specs[sid] = s
        return self._specs[sid]
