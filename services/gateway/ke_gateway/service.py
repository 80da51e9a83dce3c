"""Gateway domain service: sessions in, events out. No gRPC types beyond protos here."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from ke_gateway.checks import check_agent_name, check_candidate_id, check_session_id, check_start
from ke_gateway.validator import SpecValidator
from kernelevolve import metrics
from kernelevolve.agent_ledger import AgentLedger
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope, now_ts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_node, list_nodes, load_candidate, load_session, update_session
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.config import AgentSettings, GatewaySettings, SearchSettings
from kernelevolve.errors import (
    DependencyTimeout,
    InvalidArgumentError,
    InvalidSpecError,
    NotFoundError,
    ResourceLimitError,
)
from kernelevolve.ids import new_session_id
from kernelevolve.spec import make_spec
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb

log = logging.getLogger(__name__)


class GatewayService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects, validator: SpecValidator,
                 search: SearchSettings, session_prefix: str, default_hardware: str,
                 limits: GatewaySettings | None = None, agent_ledger: AgentLedger | None = None,
                 agent: AgentSettings | None = None) -> None:
        self._bus = bus
        self._store = store
        self._subjects = subjects
        self._validator = validator
        self._search = search
        self._session_prefix = session_prefix
        self._default_hardware = default_hardware
        self._limits = limits or GatewaySettings()
        self._agent_ledger = agent_ledger or AgentLedger(bus)
        self._agent = agent or AgentSettings()

    async def start_session(self, req: spb.StartSessionRequest, deadline_s: float | None = None) -> pb.Session:
        """``deadline_s``: seconds left of the caller's deadline (None: none was set); spec
        validation gets at most that, less a margin to write the session and answer."""
        p = check_start(req, self._search, self._default_hardware)
        name, budget, strategy, hardware, max_inflight = p.name, p.budget, p.strategy, p.hardware, p.max_inflight
        sid = p.session_id or new_session_id()
        spec = make_spec(name, p.source)
        timeout_s = self._limits.validate_timeout_s
        if deadline_s is not None:
            timeout_s = min(timeout_s, deadline_s - 0.5)
            if timeout_s <= 0:
                raise DependencyTimeout("the call's deadline leaves no time to validate the spec")
        check = await self._validator.validate(spec, timeout_s=timeout_s)
        if not check.ok and check.resource_limited:
            raise ResourceLimitError(check.reason)
        if not check.ok:
            raise InvalidSpecError(check.reason or "the reference could not be run")
        art = Artifacts.for_session(self._session_prefix, sid)
        session = pb.Session(
            session_id=sid, spec=spec, hardware=pb.HardwareTarget(kind=hardware), budget=budget,
            strategy=strategy, status=pb.SESSION_STATUS_RUNNING, created_at=now_ts(),
            artifact_prefix=art.prefix, max_inflight=max_inflight,
            seeds=p.options.seeds, time_limit_s=p.options.time_limit_s, plateau=p.options.plateau,
            target_roofline=p.options.target_roofline, baseline=p.options.baseline,
            tune_share=p.options.tune_share, tune_elite=p.options.tune_elite, precision=p.options.precision,
        )
        await self._bus.kv_create(Keys.session(sid), session.SerializeToString())  # ConflictError if taken
        await self._store.put(art.spec, spec.source.encode(), "text/x-python")
        if check.warnings:
            await self._store.put(f"{art.prefix}spec_warnings.json", json.dumps(list(check.warnings)).encode(),
                                  "application/json")
        await self._bus.publish(self._subjects.started(sid), envelope(sid, session_started=ev.SessionStarted(
            session=session)), dedup_id=f"start-{sid}")
        metrics.SESSIONS_STARTED.inc()
        log.info("session started", extra={"session_id": sid, "spec": name, "budget": budget,
                                           "hardware": hardware})
        return session

    async def get_session(self, sid: str) -> pb.Session:
        check_session_id(sid)
        return await load_session(self._bus, sid)

    async def watch(self, sid: str, after_sequence: int = 0) -> AsyncIterator[ev.Envelope]:
        """The session's events in order; ``after_sequence`` resumes after the last one seen."""
        await self.get_session(sid)  # NOT_FOUND before streaming anything
        async for env in self._bus.watch(self._subjects.session(sid), after_sequence=after_sequence):
            yield env
            if env.WhichOneof("payload") == "session_completed":
                return

    async def list_nodes(self, sid: str) -> list[pb.Node]:
        await self.get_session(sid)
        return await list_nodes(self._bus, sid)

    async def get_candidate(self, sid: str, cid: str) -> spb.GetCandidateResponse:
        await self.get_session(sid)
        check_candidate_id(cid)
        cand = await load_candidate(self._bus, sid, cid)
        resp = spb.GetCandidateResponse(candidate=cand, source=(await self._store.get(cand.source_key)).decode())
        node = await get_node(self._bus, sid, cid)
        if node is not None:
            resp.node.CopyFrom(node)
            if resp.node.report_key:
                try:
                    resp.report_json = (await self._store.get(resp.node.report_key)).decode()
                except NotFoundError:
                    pass
        return resp

    async def get_report(self, sid: str) -> str:
        """The session's HTML report, drawn from its artifacts in the store (the same page
        ``kernelevolve report`` writes into a run folder)."""
        from kernelevolve.report import load_from_store, render_html

        session = await self.get_session(sid)
        prefix = session.artifact_prefix or Artifacts.for_session(self._session_prefix, sid).prefix

        async def get(key: str) -> bytes | None:
            try:
                return await self._store.get(key)
            except NotFoundError:
                return None

        summary = {"session_id": sid, "spec": session.spec.name, "budget": session.budget,
                   "status": pb.SessionStatus.Name(session.status),
                   "best_candidate_id": session.best_candidate_id, "best_speedup": session.best_speedup}
        run = await load_from_store(get, prefix, sid, summary)
        if not run.nodes:  # a running session has no lineage.json yet: use the live tree
            from kernelevolve.artifacts import lineage_document

            run = await load_from_store(_with_lineage(get, prefix, lineage_document(
                sid, session.spec.name, await list_nodes(self._bus, sid))), prefix, sid, summary)
        return render_html(run)

    async def cancel(self, sid: str) -> pb.Session:
        session = await self.get_session(sid)
        if session.status == pb.SESSION_STATUS_RUNNING:
            await self._bus.publish(self._subjects.cancel(sid), envelope(
                sid, session_cancel_requested=ev.SessionCancelRequested(session_id=sid)), dedup_id=f"cancel-{sid}")
            log.info("cancel requested", extra={"session_id": sid})
        return session

    async def resume(self, sid: str, budget: int = 0) -> pb.Session:
        """Continue a session whose work stopped (its processes were killed or shut down):
        the search service re-publishes what its durable state still owes. A finished
        session is returned as it is, after asking once more for any end files it lacks."""
        check_session_id(sid)
        if budget < 0 or budget > self._search.max_budget:
            raise InvalidArgumentError(f"budget must be between 1 and {self._search.max_budget}, got {budget}")

        def bump(session: pb.Session) -> bool:
            if session.status != pb.SESSION_STATUS_RUNNING:
                return False  # finished: returned as it is
            session.resumes += 1
            if budget:
                session.budget = budget
            return True

        session = await update_session(self._bus, sid, bump)
        running = session.status == pb.SESSION_STATUS_RUNNING
        req = ev.SessionResumeRequested(session_id=sid, budget=budget if running else 0,
                                        attempt=session.resumes)
        await self._bus.publish(self._subjects.resume(sid), envelope(sid, session_resume_requested=req),
                                dedup_id=f"resume-{sid}-{session.resumes}-{int(running)}")
        log.info("resume requested", extra={"session_id": sid, "running": running, "resumes": session.resumes})
        return session

    async def list_sessions(self, status: int = pb.SESSION_STATUS_UNSPECIFIED) -> list[pb.Session]:
        """Every session the bus's key-value store holds, newest first."""
        sessions = []
        for key in await self._bus.kv_keys("session."):
            entry = await self._bus.kv_get(key)
            if entry is None:
                continue  # deleted meanwhile
            session = pb.Session()
            session.ParseFromString(entry.value)
            if status and session.status != status:
                continue
            session.spec.source = ""  # a listing carries no spec sources (GetSession does)
            sessions.append(session)
        sessions.sort(key=lambda s: (s.created_at.seconds, s.created_at.nanos, s.session_id), reverse=True)
        return sessions

    # -- the agent synthesizer's requests (answered by an external agent or a person) -------

    async def agent_next(self, req: spb.AgentNextRequest, deadline_s: float | None = None) -> spb.AgentRequest:
        """Hand out the oldest open request; NotFoundError when none opens within the wait."""
        sid = check_session_id(req.session_id) if req.session_id else ""
        wait_s = min(max(0.0, req.wait_s), self._agent.max_wait_s)
        if deadline_s is not None:
            wait_s = min(wait_s, max(0.0, deadline_s - 1.0))
        rec = await self._agent_ledger.next(sid, check_agent_name(req.agent), wait_s, self._agent.poll_s)
        log.info("agent request handed out", extra={"session_id": rec.session_id, "agent_request": rec.request_id,
                                                    "agent": rec.taken_by})
        return rec

    async def agent_submit(self, req: spb.AgentSubmitRequest) -> spb.AgentSubmitResponse:
        if not req.request_id:
            raise InvalidArgumentError("request_id is required")
        rec = await self._agent_ledger.submit(req.request_id, req.source, check_agent_name(req.agent))
        log.info("agent answer accepted", extra={"session_id": rec.session_id, "agent_request": rec.request_id,
                                                 "agent": rec.answered_by})
        return spb.AgentSubmitResponse(request_id=rec.request_id, session_id=rec.session_id,
                                       candidate_id=rec.slot_id)


def _with_lineage(get: Callable[[str], Awaitable[bytes | None]], prefix: str,
                  lineage: dict[str, object]) -> Callable[[str], Awaitable[bytes | None]]:
    doc = json.dumps(lineage).encode()

    async def wrapped(key: str) -> bytes | None:
        return doc if key == f"{prefix}lineage.json" else await get(key)

    return wrapped
