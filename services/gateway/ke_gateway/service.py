"""Gateway domain service: sessions in, events out. No gRPC types beyond protos here."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from ke_gateway.validator import SpecValidator
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.envelope import envelope, now_ts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_node, list_nodes, load_candidate, load_session
from kernelevolve.bus.subjects import Keys, Subjects, check_token
from kernelevolve.config import SearchSettings
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError, NotFoundError
from kernelevolve.ids import new_session_id
from kernelevolve.ports.strategy import check_strategy_name
from kernelevolve.spec import check_source, make_spec
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb

log = logging.getLogger(__name__)


class GatewayService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects, validator: SpecValidator,
                 search: SearchSettings, session_prefix: str, default_hardware: str) -> None:
        self._bus = bus
        self._store = store
        self._subjects = subjects
        self._validator = validator
        self._search = search
        self._session_prefix = session_prefix
        self._default_hardware = default_hardware

    async def start_session(self, req: spb.StartSessionRequest) -> pb.Session:
        if not req.spec.source.strip():
            raise InvalidSpecError("spec source is empty")
        name = req.spec.name or "operator"
        check_token(name, "spec name")
        check_source(req.spec.source, name)
        budget = req.budget or self._search.default_budget
        if not 1 <= budget <= self._search.max_budget:
            raise InvalidArgumentError(f"budget must be between 1 and {self._search.max_budget}, got {budget}")
        strategy = req.strategy or self._search.strategy
        check_strategy_name(strategy)
        hardware = req.hardware_kind or self._default_hardware
        check_token(hardware, "hardware kind")
        max_inflight = req.max_inflight or self._search.max_inflight
        if max_inflight < 1:
            raise InvalidArgumentError("max_inflight must be at least 1")
        sid = check_token(req.session_id, "session id") if req.session_id else new_session_id()
        spec = make_spec(name, req.spec.source)
        check = await self._validator.validate(spec)
        if not check.ok:
            raise InvalidSpecError(check.reason or "the reference could not be run")
        art = Artifacts.for_session(self._session_prefix, sid)
        session = pb.Session(
            session_id=sid, spec=spec, hardware=pb.HardwareTarget(kind=hardware), budget=budget,
            strategy=strategy, status=pb.SESSION_STATUS_RUNNING, created_at=now_ts(),
            artifact_prefix=art.prefix, max_inflight=max_inflight,
        )
        await self._bus.kv_create(Keys.session(sid), session.SerializeToString())  # ConflictError if taken
        await self._store.put(art.spec, spec.source.encode(), "text/x-python")
        if check.warnings:
            await self._store.put(f"{art.prefix}spec_warnings.json", json.dumps(list(check.warnings)).encode(),
                                  "application/json")
        await self._bus.publish(self._subjects.started(sid), envelope(sid, session_started=ev.SessionStarted(
            session=session)), dedup_id=f"start-{sid}")
        log.info("session started", extra={"session_id": sid, "spec": name, "budget": budget,
                                           "hardware": hardware})
        return session

    async def get_session(self, sid: str) -> pb.Session:
        check_token(sid, "session id")
        return await load_session(self._bus, sid)

    async def watch(self, sid: str) -> AsyncIterator[ev.Envelope]:
        await self.get_session(sid)  # NOT_FOUND before streaming anything
        async for env in self._bus.watch(self._subjects.session(sid)):
            yield env
            if env.WhichOneof("payload") == "session_completed":
                return

    async def list_nodes(self, sid: str) -> list[pb.Node]:
        await self.get_session(sid)
        return await list_nodes(self._bus, sid)

    async def get_candidate(self, sid: str, cid: str) -> spb.GetCandidateResponse:
        await self.get_session(sid)
        check_token(cid, "candidate id")
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


def _with_lineage(get: Callable[[str], Awaitable[bytes | None]], prefix: str,
                  lineage: dict[str, object]) -> Callable[[str], Awaitable[bytes | None]]:
    doc = json.dumps(lineage).encode()

    async def wrapped(key: str) -> bytes | None:
        return doc if key == f"{prefix}lineage.json" else await get(key)

    return wrapped
