"""The agent synthesizer's request ledger: synthesis requests answered from outside.

Each request slot (one candidate to be, ``<CandidateRequested.request_id>-<n>``) is one
``AgentRequest`` record in the bus key-value store under ``agent.<session>.<slot>``, so the
synthesizer that waits for it, the gateway that hands it out and the gateway (maybe on
another machine) that takes the answer all read and write the same durable record, with
compare-and-set. Life of a record::

    OPEN --take (AgentNext)--> TAKEN --answer (AgentSubmit)--> ANSWERED
      ^                          |
      +--- deadline passed, offers left: re-offered (offer + 1) ---+
                deadline passed, no offers left: ABANDONED

An answer names the offer it answers (request id ``<session>.<slot>.<offer>``), so an
answer to an offer that timed out is refused even after the request was re-offered.
The transitions are pure functions of (record, clock) so they are tested without a bus.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import logging
import time
from collections.abc import Callable

from kernelevolve import pyast
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_record
from kernelevolve.bus.subjects import Keys, check_token
from kernelevolve.errors import ConflictError, InvalidArgumentError, NotFoundError
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb

log = logging.getLogger(__name__)

OPEN = spb.AGENT_REQUEST_STATE_OPEN
TAKEN = spb.AGENT_REQUEST_STATE_TAKEN
ANSWERED = spb.AGENT_REQUEST_STATE_ANSWERED
ABANDONED = spb.AGENT_REQUEST_STATE_ABANDONED
MAX_ANSWER_BYTES = 1 << 20
# Compare-and-set attempts before a contended record is reported as busy.
_CAS_TRIES = 20

Clock = Callable[[], float]


def record_key(session_id: str, slot_id: str) -> str:
    return f"agent.{session_id}.{slot_id}"


def session_prefix(session_id: str = "") -> str:
    return f"agent.{session_id}." if session_id else "agent."


def request_id(rec: spb.AgentRequest) -> str:
    return f"{rec.session_id}.{rec.slot_id}.{rec.offer}"


def parse_request_id(rid: str) -> tuple[str, str, int]:
    parts = rid.split(".")
    if len(parts) != 3 or not parts[2].isdigit():
        raise InvalidArgumentError(f"agent request id {rid!r} is not of the form <session>.<slot>.<offer>")
    return check_token(parts[0], "session id"), check_token(parts[1], "request slot"), int(parts[2])


def state_name(state: int) -> str:
    return spb.AgentRequestState.Name(state).removeprefix("AGENT_REQUEST_STATE_").lower()


# -- pure transitions ---------------------------------------------------------------------


def new_record(session_id: str, slot_id: str, *, prompt: str, spec_name: str, spec_source: str,
               parent_id: str, parent_source: str, hardware_kind: str, timeout_s: float, max_offers: int,
               now: float) -> spb.AgentRequest:
    rec = spb.AgentRequest(
        slot_id=check_token(slot_id, "request slot"), session_id=check_token(session_id, "session id"),
        prompt=prompt, parent_id=parent_id, parent_source=parent_source, state=OPEN, offer=1,
        max_offers=max(1, max_offers), deadline=now + timeout_s, timeout_s=timeout_s, hardware_kind=hardware_kind)
    rec.spec.name, rec.spec.source = spec_name, spec_source
    rec.request_id = request_id(rec)
    return rec


def expire(rec: spb.AgentRequest, now: float) -> spb.AgentRequest | None:
    """The record after its deadline passed unanswered (re-offered or abandoned), or None
    when nothing is due."""
    if rec.state not in (OPEN, TAKEN) or now < rec.deadline:
        return None
    out = spb.AgentRequest()
    out.CopyFrom(rec)
    if rec.offer < rec.max_offers:
        out.offer = rec.offer + 1
        out.state, out.taken_by, out.deadline = OPEN, "", now + rec.timeout_s
        out.request_id = request_id(out)
    else:
        out.state = ABANDONED
        out.reason = (f"no answer to agent request {rec.request_id} after {rec.max_offers} offer(s) of "
                      f"{rec.timeout_s:g}s each: node abandoned")
    return out


def abandon(rec: spb.AgentRequest, reason: str) -> spb.AgentRequest | None:
    """Give an unanswered request up (its session ended); None when it is already settled."""
    if rec.state not in (OPEN, TAKEN):
        return None
    out = spb.AgentRequest()
    out.CopyFrom(rec)
    out.state, out.reason = ABANDONED, reason
    return out


def take(rec: spb.AgentRequest, agent: str, now: float) -> spb.AgentRequest:
    """Hand an open offer to one answerer; its deadline restarts so it has the full timeout."""
    if rec.state != OPEN or now >= rec.deadline:
        raise ConflictError(f"agent request {rec.request_id} is not open")
    out = spb.AgentRequest()
    out.CopyFrom(rec)
    out.state, out.taken_by, out.deadline = TAKEN, agent or "anonymous", now + rec.timeout_s
    return out


def check_answer(source: str) -> None:
    """What is checked before an answer is accepted: a module that parses and defines
    ``ModelNew``. The evaluator judges everything else."""
    if len(source.encode()) > MAX_ANSWER_BYTES:
        raise InvalidArgumentError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        raise InvalidArgumentError(f"the answer does not parse: {exc.msg} (line {exc.lineno})") from exc
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "ModelNew" not in defined:
        raise InvalidArgumentError("the answer must be a whole module defining ModelNew (torch + triton)")


def answer(rec: spb.AgentRequest, offer: int, source: str, agent: str, now: float) -> spb.AgentRequest:
    rid = f"{rec.session_id}.{rec.slot_id}.{offer}"
    if rec.state == ANSWERED:
        raise ConflictError(f"agent request {rid} refused: already answered by {rec.answered_by}")
    if rec.state == ABANDONED:
        raise ConflictError(f"agent request {rid} refused: expired ({rec.reason})")
    if offer != rec.offer:
        raise ConflictError(f"agent request {rid} refused: expired, its offer timed out and the request was "
                            f"re-offered as {rec.request_id}")
    if now >= rec.deadline:
        raise ConflictError(f"agent request {rid} refused: expired {now - rec.deadline:.0f}s ago "
                            f"(timeout {rec.timeout_s:g}s)")
    check_answer(source)
    out = spb.AgentRequest()
    out.CopyFrom(rec)
    out.state, out.answer_source, out.answered_by = ANSWERED, source, agent or rec.taken_by or "anonymous"
    return out


# -- the ledger over the bus key-value store ------------------------------------------------


class AgentLedger:
    def __init__(self, bus: EventBus, clock: Clock = time.time) -> None:
        self._bus = bus
        self._clock = clock

    def now(self) -> float:
        return self._clock()

    async def post(self, rec: spb.AgentRequest) -> spb.AgentRequest:
        """Record a new request; a redelivered synthesis request finds its record as it was."""
        key = record_key(rec.session_id, rec.slot_id)
        try:
            await self._bus.kv_create(key, rec.SerializeToString())
            log.info("agent request posted", extra={"session_id": rec.session_id, "agent_request": rec.request_id})
            return rec
        except ConflictError:
            existing = await self.get(rec.session_id, rec.slot_id)
            assert existing is not None
            return existing

    async def get(self, session_id: str, slot_id: str) -> spb.AgentRequest | None:
        entry = await self._bus.kv_get(record_key(session_id, slot_id))
        if entry is None:
            return None
        rec = spb.AgentRequest()
        rec.ParseFromString(entry.value)
        return rec

    async def _update(self, session_id: str, slot_id: str,
                      change: Callable[[spb.AgentRequest], spb.AgentRequest | None]) -> spb.AgentRequest | None:
        """Apply ``change`` with compare-and-set; returns the record as stored afterwards
        (None: no such record). ``change`` returns None for no change and may raise."""
        key = record_key(session_id, slot_id)
        for _ in range(_CAS_TRIES):
            entry = await self._bus.kv_get(key)
            if entry is None:
                return None
            rec = spb.AgentRequest()
            rec.ParseFromString(entry.value)
            new = change(rec)
            if new is None:
                return rec
            try:
                await self._bus.kv_update(key, new.SerializeToString(), entry.revision)
            except ConflictError:
                continue  # someone else wrote first: look again
            if new.state != rec.state or new.offer != rec.offer:
                log.info("agent request now " + state_name(new.state),
                         extra={"session_id": new.session_id, "agent_request": new.request_id,
                                "reason": new.reason})
            return new
        raise ConflictError(f"agent record {key} is too contended; try again")

    async def refresh(self, session_id: str, slot_id: str) -> spb.AgentRequest | None:
        """The record, re-offered or abandoned first when its deadline passed."""
        return await self._update(session_id, slot_id, lambda r: expire(r, self._clock()))

    async def wait(self, session_id: str, slot_id: str, poll_s: float,
                   session_check_s: float = 2.0) -> spb.AgentRequest:
        """Until the request is answered or abandoned (re-offering it on each timeout, and
        giving it up when its session ended, so no one is offered dead work)."""
        checked = self._clock()
        while True:
            rec = await self.refresh(session_id, slot_id)
            if rec is None:
                raise NotFoundError(f"agent request slot {session_id}.{slot_id} vanished from the ledger")
            if rec.state in (ANSWERED, ABANDONED):
                return rec
            if self._clock() - checked >= session_check_s:
                checked = self._clock()
                ended = await self._session_ended(session_id)
                if ended:
                    done = await self._update(session_id, slot_id, functools.partial(
                        abandon, reason=f"session {session_id} ended ({ended}) before agent request "
                                        f"{rec.request_id} was answered"))
                    assert done is not None
                    if done.state in (ANSWERED, ABANDONED):
                        return done
            await asyncio.sleep(poll_s)

    async def _session_ended(self, session_id: str) -> str:
        """The status of an ended session, "" while it runs (or outside any session)."""
        session = await get_record(self._bus, Keys.session(session_id), pb.Session)
        if session is None or session.status in (pb.SESSION_STATUS_RUNNING, pb.SESSION_STATUS_UNSPECIFIED):
            return ""
        return pb.SessionStatus.Name(session.status).removeprefix("SESSION_STATUS_").lower()

    async def pending(self, session_id: str = "") -> list[spb.AgentRequest]:
        """Open and taken requests (deadlines applied), oldest deadline first."""
        out = []
        for key in await self._bus.kv_keys(session_prefix(session_id)):
            _, sid, slot = key.split(".", 2)
            rec = await self.refresh(sid, slot)
            if rec is not None and rec.state in (OPEN, TAKEN):
                out.append(rec)
        return sorted(out, key=lambda r: (r.deadline, r.request_id))

    async def next(self, session_id: str = "", agent: str = "", wait_s: float = 0.0,
                   poll_s: float = 0.25) -> spb.AgentRequest:
        """Take the oldest open request (of one session, or any); NotFoundError when none
        opens within ``wait_s``."""
        if session_id:
            check_token(session_id, "session id")
        end = self._clock() + max(0.0, wait_s)
        while True:
            for rec in await self.pending(session_id):
                if rec.state != OPEN:
                    continue
                try:
                    taken = await self._update(rec.session_id, rec.slot_id, lambda r: take(r, agent, self._clock()))
                except ConflictError:
                    continue  # another answerer took it first
                if taken is not None and taken.state == TAKEN and taken.offer == rec.offer:
                    return taken
            if self._clock() >= end:
                where = f" for session {session_id}" if session_id else ""
                raise NotFoundError(f"no agent request pending{where}")
            await asyncio.sleep(poll_s)

    async def submit(self, rid: str, source: str, agent: str = "") -> spb.AgentRequest:
        sid, slot, offer = parse_request_id(rid)
        rec = await self.refresh(sid, slot)
        if rec is None:
            raise NotFoundError(f"agent request {rid} refused: unknown request")
        done = await self._update(sid, slot, lambda r: answer(r, offer, source, agent, self._clock()))
        assert done is not None
        return done
