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


def session_usage(synth: object, session_id: str) -> dict[str, float]:
    """What a paying synthesizer spent on a session ({} for one that does not pay)."""
    fn = getattr(synth, "session_usage", None)
    return dict(fn(session_id)) if fn is not None else {}


def from_llm(genome: dict[str, str]) -> bool:
    """A candidate the LLM wrote (its genome records the model, not lowering choices)."""
    return "llm_model" in genome


class Hybrid:
    """The offline compiler seeds (requests without a parent) and tunes its own candidates'
    launch configurations (``ProposalRequest.tune``: it knows their knobs exactly); every
    other expansion or repair goes to the LLM, whose parent is then the offline compiler's
    best candidate as soon as the strategy picks it."""

    name = "offline+llm"

    def __init__(self, offline: CandidateSynthesizer, llm: CandidateSynthesizer) -> None:
        self.offline, self.llm = offline, llm

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if request.parent is None or (request.tune and not from_llm(request.parent.genome)):
            return self.offline.propose(request)
        return self.llm.propose(request)

    def observe(self, genome: dict[str, str], status: str, speedup: float) -> None:
        observe(self.llm, genome, status, speedup)

    def session_usage(self, session_id: str) -> dict[str, float]:
        return session_usage(self.llm, session_id)


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
            if request.parent is not None and from_llm(request.parent.genome):
                # The offline compiler cannot continue an LLM kernel (its genome holds no
                # lowering choices): it proposes from the reference instead.
                request = replace(request, parent=None, repair_attempt=0, tune=False)
            return [_mark(p, self.fallback.name, reason) for p in self.fallback.propose(request)]

    def observe(self, genome: dict[str, str], status: str, speedup: float) -> None:
        observe(self.primary, genome, status, speedup)

    def session_usage(self, session_id: str) -> dict[str, float]:
        return session_usage(self.primary, session_id)


def _mark(p: Proposal, used: str, reason: str) -> Proposal:
    t = Transformation(p.transformation.name, {**p.transformation.params, "fallback_from": "llm"})
    return replace(p, transformation=t, genome={**p.genome, "fallback_from": "llm", "fallback_to": used,
                                                "fallback_reason": reason})
