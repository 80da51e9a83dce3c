"""The agent synthesizer: publishes each requested candidate as an ``AgentRequest`` in the
ledger (``kernelevolve.agent_ledger``) and waits, on the event loop, for an answer.

A request that stays unanswered past its timeout is re-offered; after ``max_offers``
offers it is abandoned and the synthesizer proposes fewer candidates than asked, which the
service reports to the search as an exhausted request (the node is given up). Ledger
records are keyed by the session's request id, so a redelivered synthesis request (after a
crash) picks up its records where they were, answers included.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable

from kernelevolve.agent_ledger import ABANDONED, ANSWERED, AgentLedger, new_record
from kernelevolve.config import AgentSettings
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation
from kernelevolve.spec import check_source
from kernelevolve.v1 import services_pb2 as spb

from .prompt import build_prompt

log = logging.getLogger(__name__)

# Session name of requests made outside a session (the contract suite, a direct call).
_NO_SESSION = "direct"


def _request_key(request: ProposalRequest) -> str:
    """The CandidateRequested id, or (outside a session) a digest of what is asked, so the
    same request always names the same ledger records."""
    if request.request_id:
        return request.request_id
    parts = [request.spec_name, request.spec_source, request.parent.candidate_id if request.parent else "",
             *(f"{t.name}{sorted(t.params.items())}" for t in request.tried)]
    return "q" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


class AgentSynthesizer:
    name = "agent"

    def __init__(self, ledger: AgentLedger, settings: AgentSettings | None = None, *,
                 prompt: Callable[[ProposalRequest], str] = build_prompt,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._ledger = ledger
        self._settings = settings or AgentSettings()
        self._prompt = prompt
        # The loop the ledger's bus lives on, for the synchronous ``propose``.
        self._loop = loop
        # Why a request got fewer candidates than asked, by (session, request id).
        self._shortfalls: dict[tuple[str, str], str] = {}

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if self._loop is None:
            return asyncio.run(self.apropose(request))
        return asyncio.run_coroutine_threadsafe(self.apropose(request), self._loop).result()

    async def apropose(self, request: ProposalRequest) -> list[Proposal]:
        check_source(request.spec_source, request.spec_name)  # InvalidSpecError before anything is posted
        if not request.spec_source.strip():
            raise InvalidSpecError(f"{request.spec_name}: spec source is empty")
        sid = request.session_id or _NO_SESSION
        key = _request_key(request)
        # in a worker thread: the prompt may ask the knowledge service, which can share this loop
        prompt = await asyncio.to_thread(self._prompt, request)
        s = self._settings
        slots = [f"{key}-{i}" for i in range(1, max(1, request.count) + 1)]
        for slot in slots:
            await self._ledger.post(new_record(
                sid, slot, prompt=prompt, spec_name=request.spec_name, spec_source=request.spec_source,
                parent_id=request.parent.candidate_id if request.parent else "",
                parent_source=request.parent.source if request.parent else "",
                hardware_kind=request.hardware_kind, timeout_s=s.timeout_s, max_offers=s.max_offers,
                now=self._ledger.now()))
        done = await asyncio.gather(*(self._ledger.wait(sid, slot, s.poll_s) for slot in slots))
        reasons = [rec.reason for rec in done if rec.state == ABANDONED]
        if reasons:
            self._shortfalls[(sid, key)] = "; ".join(reasons)
        return [p for rec in done if (p := self._to_proposal(rec)) is not None]

    def shortfall(self, session_id: str, request_id: str) -> str:
        return self._shortfalls.pop((session_id or _NO_SESSION, request_id), "")

    def _to_proposal(self, rec: spb.AgentRequest) -> Proposal | None:
        if rec.state == ABANDONED:
            log.warning("agent request abandoned", extra={"session_id": rec.session_id,
                                                          "agent_request": rec.request_id, "reason": rec.reason})
            return None
        assert rec.state == ANSWERED
        return Proposal(source=rec.answer_source, transformation=Transformation("agent", {"request": rec.slot_id}),
                        genome={"agent": rec.answered_by},
                        description=f"written by {rec.answered_by} (agent request {rec.request_id})")
