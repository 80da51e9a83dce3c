"""Evaluator service: consumes CandidateGenerated for its hardware kind from a durable
work queue, judges each candidate with the ``Judge`` (sandboxed workers) and publishes
EvaluationCompleted. Translation and I/O only; verdicts come from ``judge.py``.

Delivery is at-least-once and the message is acknowledged only after the report is in
the object store and the verdict published, so an evaluator killed mid-evaluation loses
nothing: another replica gets the candidate again. The report keyed by candidate id
makes a redelivery re-publish the stored verdict instead of judging twice. A candidate
whose evaluation was started ``max_attempts`` times without a verdict is settled as
``crashed`` on its last delivery, without running it again, so it cannot block the queue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from ke_evaluator.convert import verdict_to_pb
from kernelevolve import metrics
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.port import EventBus, Subscription
from kernelevolve.bus.records import load_session
from kernelevolve.bus.subjects import Subjects
from kernelevolve.ports.judge import JudgePort
from kernelevolve.ports.verdict import SpecCheck, Verdict
from kernelevolve.precision import Precision
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

class EvaluatorService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects, judge: JudgePort,
                 hardware_kind: str, parallel: int = 1, *, max_attempts: int = 2,
                 ack_wait_s: float = 60.0, screen: bool = False) -> None:
        """``screen``: candidates get the screen tier, re-checks (``on_retime``) the full one."""
        self._bus = bus
        self._screen = screen
        self._store = store
        self._subjects = subjects
        self._judge = judge
        self.hardware_kind = hardware_kind
        # One judge, one device: at most ``parallel`` evaluations at once, one per worker of
        # the judge (EvalOptions.parallel_workers); the judge keeps timings from overlapping.
        self.parallel = max(1, parallel)
        self._slots = asyncio.Semaphore(self.parallel)
        self._specs: dict[str, pb.Session] = {}
        self.max_attempts = max(1, max_attempts)
        self._ack_wait_s = ack_wait_s
        self._subscriptions: list[Subscription] = []

    async def subscribe(self) -> None:
        # Shared durable per hardware kind: evaluators of one kind split the work queue.
        self._subscriptions.append(await self._bus.consume(
            self._subjects.candidate(hardware=self.hardware_kind), f"evaluator-{self.hardware_kind}",
            self.on_candidate, ack_wait_s=self._ack_wait_s, max_deliver=self.max_attempts + 1,
            concurrency=self.parallel))
        self._subscriptions.append(await self._bus.consume(
            self._subjects.retime(hardware=self.hardware_kind), f"evaluator-{self.hardware_kind}-retime",
            self.on_retime, ack_wait_s=self._ack_wait_s, max_deliver=self.max_attempts + 1))

    async def stop(self) -> None:
        """Stop taking work; running handlers are cancelled (their messages come back later)."""
        subs, self._subscriptions = self._subscriptions, []
        for sub in subs:
            await sub.stop()

    async def validate_spec(self, spec: pb.OperatorSpec) -> SpecCheck:
        async with self._slots:
            return await asyncio.to_thread(self._judge.validate_spec, spec.source, spec.name)

    async def evaluate(self, spec: pb.OperatorSpec, source: str, candidate_id: str,
                       fresh_worker: bool = False, compile_baseline: bool = False, precision: str = "",
                       tier: str | None = None) -> Verdict:
        # Only a session that asked for the compile baseline passes it on (see JudgePort);
        # its precision contract, whenever the judge would otherwise judge under another;
        # a tier only when one is asked for.
        extra: dict[str, Any] = {"compile_baseline": True} if compile_baseline else {}
        judge_default = getattr(getattr(self._judge, "opts", None), "precision", "default")
        if precision and precision != judge_default:
            extra["precision"] = precision
        if tier is not None:
            extra["tier"] = tier
        async with self._slots:
            start = time.perf_counter()
            verdict = await asyncio.to_thread(self._judge.evaluate, spec.source, source, candidate_id, fresh_worker,
                                              **extra)
        metrics.EVALUATION_SECONDS.labels(self.hardware_kind).observe(time.perf_counter() - start)
        metrics.EVALUATIONS.labels(self.hardware_kind, verdict.status).inc()
        return verdict

    async def on_candidate(self, env: ev.Envelope) -> None:
        cand = env.candidate_generated.candidate
        sid, cid = cand.session_id, cand.candidate_id
        if cand.duplicate_of:
            return  # a twin of an earlier candidate: the search records it, nobody judges it
        if env.HasField("occurred_at"):
            waited = time.time() - env.occurred_at.seconds - env.occurred_at.nanos / 1e9
            metrics.QUEUE_LAG_SECONDS.labels(self.hardware_kind).observe(max(0.0, waited))
        result = await self._judge_once(cand, retime=False, delivery=env.delivery)
        done = ev.EvaluationCompleted(session_id=sid, result=result)
        await self._bus.publish(self._subjects.evaluation(sid), envelope(sid, evaluation_completed=done),
                                dedup_id=f"eval-{sid}-{cid}")

    async def on_retime(self, env: ev.Envelope) -> None:
        cand = env.retime_requested.candidate
        sid, cid = cand.session_id, cand.candidate_id
        result = await self._judge_once(cand, retime=True, delivery=env.delivery)
        done = ev.CandidateRetimed(session_id=sid, result=result)
        await self._bus.publish(self._subjects.retimed(sid), envelope(sid, candidate_retimed=done),
                                dedup_id=f"retimed-{sid}-{cid}")

    async def _judge_once(self, cand: pb.Candidate, retime: bool, delivery: int = 0) -> pb.EvaluationResult:
        """Judge a candidate, or re-publish the stored verdict when this is a redelivery."""
        sid, cid = cand.session_id, cand.candidate_id
        session = await self._session(sid)
        art = Artifacts(session.artifact_prefix)
        report_key = art.retime_report(cid) if retime else art.report(cid)
        if await self._store.exists(report_key):
            verdict = Verdict.from_dict(json.loads(await self._store.get(report_key)))
        elif delivery > self.max_attempts:
            # Every earlier delivery started an evaluation and none left a report: most
            # likely the candidate (or something it triggers) takes its evaluator down.
            # Settle it without running it again; the report says so.
            verdict = Verdict(
                status="crashed", candidate_id=cid, device=self.hardware_kind,
                reason=(f"evaluation started {delivery - 1} times without a verdict: each attempt ended "
                        "before its report was stored (the evaluator was killed or crashed while judging "
                        "this candidate, or its store or bus failed)"),
                evidence={"deliveries": delivery, "max_attempts": self.max_attempts},
                precision=Precision(name=session.precision or "default"))
            log.warning("candidate settled as crashed after repeated evaluator failures",
                        extra={"session_id": sid, "candidate_id": cid, "delivery": delivery, "retime": retime})
            await self._store.put(report_key, json.dumps(verdict.to_dict(), indent=2).encode(), "application/json")
        else:
            source = (await self._store.get(cand.source_key)).decode()
            log.info("evaluating", extra={"session_id": sid, "candidate_id": cid, "retime": retime})
            # A re-timing runs in a newly started worker: nothing cached from the first run helps it.
            # Screening on: a first evaluation is a screen, a re-check the full protocol.
            tier = ("full" if retime else "screen") if self._screen else None
            verdict = await self.evaluate(session.spec, source, cid, fresh_worker=retime,
                                          compile_baseline=session.baseline == "compile",
                                          precision=session.precision, tier=tier)
            verdict.candidate_id = cid
            if delivery > 1:
                # An earlier attempt ended without a report (its evaluator was killed): this
                # one redid it, and the report says so.
                verdict.evidence["interrupted_attempts"] = delivery - 1
            await self._store.put(report_key, json.dumps(verdict.to_dict(), indent=2).encode(), "application/json")
        log.info("evaluated", extra={"session_id": sid, "candidate_id": cid, "status": verdict.status,
                                     "speedup": verdict.speedup, "retime": retime})
        result = verdict_to_pb(verdict, self.hardware_kind, report_key)
        result.interrupted_attempts = int(verdict.evidence.get("interrupted_attempts", 0))
        return result

    async def _session(self, sid: str) -> pb.Session:
        if sid not in self._specs:
            self._specs[sid] = await load_session(self._bus, sid)
        return self._specs[sid]
