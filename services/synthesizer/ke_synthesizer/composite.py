"""Synthesizers made of others: ``offline+llm`` and the recorded fallback to offline."""

from __future__ import annotations

import logging
from dataclasses import replace

from kernelevolve.errors import LlmAuthError, LlmUnavailable
from kernelevolve.ports.synthesis import CandidateSynthesizer, Proposal, ProposalRequest, Transformation

log = logging.getLogger(__name__)


def observe(synth: object, genome: dict[str, str], status: str, speedup: float) -> None:
    fn = getattr(synth, "observe", None)
    if fn is not None:
        fn(genome, status, speedup)


class Hybrid:
    """The offline compiler seeds (requests without a parent); every expansion or repair
    goes to the LLM, whose parent is then the offline compiler's best candidate as soon
    as the strategy picks it."""

    name = "offline+llm"

    def __init__(self, offline: CandidateSynthesizer, llm: CandidateSynthesizer) -> None:
        self.offline, self.llm = offline, llm

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if request.parent is None:
            return self.offline.propose(request)
        return self.llm.propose(request)

    def observe(self, genome: dict[str, str], status: str, speedup: float) -> None:
        observe(self.llm, genome, status, speedup)


class WithFallback:
    """``--fallback offline``: when the LLM endpoint is down or refuses the key, the offline
    compiler answers instead, and every such candidate says so in its genome and
    transformation (``fallback_from``, ``fallback_reason``). Without it the error ends the
    session (no silent switch)."""

    def __init__(self, primary: CandidateSynthesizer, fallback: CandidateSynthesizer) -> None:
        self.primary, self.fallback = primary, fallback
        self.name = primary.name

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        try:
            return self.primary.propose(request)
        except (LlmUnavailable, LlmAuthError) as exc:
            reason = str(exc)[:300]
            log.warning("llm unavailable; falling back to offline",
                        extra={"session_id": request.session_id, "reason": reason})
            return [_mark(p, self.fallback.name, reason) for p in self.fallback.propose(request)]

    def observe(self, genome: dict[str, str], status: str, speedup: float) -> None:
        observe(self.primary, genome, status, speedup)


def _mark(p: Proposal, used: str, reason: str) -> Proposal:
    t = Transformation(p.transformation.name, {**p.transformation.params, "fallback_from": "llm"})
    return replace(p, transformation=t, genome={**p.genome, "fallback_from": "llm", "fallback_to": used,
                                                "fallback_reason": reason})
