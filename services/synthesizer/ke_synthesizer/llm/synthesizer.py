"""The LLM synthesizer: prompts OpenAI-compatible endpoints and checks the replies.

Per request: gather documents and skills through the ``KnowledgeReader``, build the
prompt (``prompt.py``), pick a model with the bandit (one bandit over the models of every
configured endpoint), call the backend (at most ``llm.concurrency`` calls in flight per
process), and turn each reply into a ``Proposal``:
checked (parses, defines ``ModelNew``, passes the static policy) or refused with its
reason, always with its record (prompt, reply, model, tokens, latency, cost, template).

Per session it counts tokens and USD; once ``llm.session_token_budget`` or
``llm.session_usd_budget`` is spent it offers nothing more, which the search service
treats as an exhausted parent: the session ends normally with its best verified kernel.
The counts live in this process (one synthesizer replica per session in the embedded and
the reference deployment).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from ke_synthesizer.llm.bandit import ModelBandit
from ke_synthesizer.llm.client import ChatBackend, Completion
from ke_synthesizer.llm.extract import check_reply
from ke_synthesizer.llm.prompt import Prompt, build_prompt, gather_context
from kernelevolve import metrics
from kernelevolve.config import LlmSettings
from kernelevolve.errors import ConfigError, LlmAuthError, LlmUnavailable
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation
from kernelevolve.spec import check_source

log = logging.getLogger(__name__)


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LlmSynthesizer:
    name = "llm"

    def __init__(self, settings: LlmSettings, backend: ChatBackend, *,
                 knowledge: KnowledgeReader | None = None) -> None:
        models = settings.model_list
        if not models:
            raise ConfigError("the LLM synthesizer needs at least one model (llm.models, --model)")
        self._s = settings
        self._backend = backend
        self._knowledge: KnowledgeReader = knowledge or NoKnowledge()
        arms = settings.arms()
        priced = any(a.price_in or a.price_out for a in arms)
        self._endpoint_of = {a.arm: a.endpoint.name for a in arms}
        self._rest_until: dict[str, float] = {}  # endpoint -> when it may be asked again (monotonic)
        self.bandit = ModelBandit(models, seed=settings.seed, by_usd=priced)
        self._slots = threading.BoundedSemaphore(max(1, settings.concurrency))
        self._lock = threading.Lock()
        self.usage: dict[str, Usage] = {}
        self.total = Usage()

    # -- the port -----------------------------------------------------------------------

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        check_source(request.spec_source, request.spec_name)  # InvalidSpecError before any token is spent
        spent = self.budget_spent(request.session_id)
        if spent:
            log.info("llm budget spent; offering nothing more",
                     extra={"session_id": request.session_id, "reason": spent})
            return []
        prompt = build_prompt(request, gather_context(request, self._knowledge),
                              token_budget=self._s.prompt_tokens)
        return asyncio.run(self._propose_all(request, prompt))

    def budget_spent(self, session_id: str) -> str:
        """Why this session may not spend more ("" = it may)."""
        u = self.usage.get(session_id, Usage())
        if self._s.session_token_budget and u.tokens >= self._s.session_token_budget:
            return f"LLM token budget spent ({u.tokens} of {self._s.session_token_budget} tokens)"
        if self._s.session_usd_budget and u.usd >= self._s.session_usd_budget:
            return f"LLM budget spent (${u.usd:.4f} of ${self._s.session_usd_budget:.4f})"
        return ""

    def session_usage(self, session_id: str) -> dict[str, float]:
        u = self.usage.get(session_id, Usage())
        return {"requests": u.requests, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                "tokens": u.tokens, "usd": round(u.usd, 6)}

    def observe(self, genome: dict[str, str], status: str, speedup: float) -> None:
        """An evaluation of one of our candidates: feeds the bandit."""
        model = genome.get("llm_model", "")
        if not model:
            return
        correct = status == "correct"
        gain = speedup - float(genome.get("parent_speedup", "0") or 0) if correct else 0.0
        self.bandit.observe(model, correct=correct, gain=gain, tokens=int(genome.get("llm_tokens", "0") or 0),
                            usd=float(genome.get("llm_usd", "0") or 0))

    # -- internals ------------------------------------------------------------------------

    async def _propose_all(self, request: ProposalRequest, prompt: Prompt) -> list[Proposal]:
        n = max(1, request.count)
        # Sample numbers continue past the edges already tried, so no edge repeats.
        first = len(request.tried)
        return list(await asyncio.gather(*(self._one(request, prompt, first + i) for i in range(n))))

    async def _ask(self, prompt: Prompt) -> tuple[str, Completion]:
        """The bandit's arm and its reply. An endpoint that stays down or refuses us rests
        (``llm.endpoint_rest_s``) while another endpoint's models can answer; the last one's
        error is the session's."""
        while True:
            model = self.bandit.choose(exclude=self._resting())
            await asyncio.to_thread(self._slots.acquire)
            try:
                return model, await self._backend.complete(model, prompt.messages())
            except (LlmUnavailable, LlmAuthError) as exc:
                endpoint = self._endpoint_of.get(model, "")
                with self._lock:
                    self._rest_until[endpoint] = time.monotonic() + self._s.endpoint_rest_s
                if not self._resting():  # every endpoint rests: none is left out, and this one failed
                    raise
                log.warning("llm endpoint failed; its models rest while other endpoints answer",
                            extra={"endpoint": endpoint, "model": model, "rest_s": self._s.endpoint_rest_s,
                                   "error": str(exc)[:300]})
            finally:
                self._slots.release()

    def _resting(self) -> frozenset[str]:
        """Arms left out now; none when that would be every arm (then all are tried again)."""
        now = time.monotonic()
        with self._lock:
            down = {e for e, until in self._rest_until.items() if until > now}
        arms = frozenset(m for m, e in self._endpoint_of.items() if e in down)
        return frozenset() if arms >= self._endpoint_of.keys() else arms

    async def _one(self, request: ProposalRequest, prompt: Prompt, sample: int) -> Proposal:
        model, done = await self._ask(prompt)
        usd = self._account(request.session_id, done)
        metrics.record_llm_usage(model, done.prompt_tokens, done.completion_tokens)
        checked = check_reply(done.text)
        parent = request.parent
        params = {"model": model, "template": prompt.template, "repairable": "1", "sample": str(sample)}
        if request.repair_attempt:
            params["repair_attempt"] = str(request.repair_attempt)
        if request.tune:
            params["tune"] = "1"  # asked by the search's tuning stage: the lineage says so
        genome = {"synthesizer": "llm", "llm_model": model, "llm_template": prompt.template,
                  "llm_tokens": str(done.tokens), "llm_usd": f"{usd:.6f}",
                  "parent_speedup": str(float(parent.result.get("speedup", 0.0) or 0.0)) if parent else "0"}
        if parent is not None and parent.genome.get("family"):
            genome["family"] = parent.genome["family"]
        record: dict[str, Any] = {
            "model": model, "template": prompt.template, "kind": prompt.kind,
            "messages": prompt.messages(), "prompt_tokens_estimated": prompt.tokens,
            "reply": done.text, "prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
            "usage_estimated": done.estimated_usage, "latency_s": round(done.latency_s, 4),
            "attempts": done.attempts, "usd": usd, "doc_ids": list(prompt.doc_ids),
            "skill_ids": list(prompt.skill_ids), "dropped_sections": list(prompt.dropped),
            "rejected": checked.rejected,
        }
        spent = self.usage.get(request.session_id, Usage())
        log.info("llm reply", extra={"session_id": request.session_id, "model": model, "tokens": done.tokens,
                                     "usd": round(usd, 6), "latency_s": round(done.latency_s, 3),
                                     "session_tokens": spent.tokens, "session_usd": round(spent.usd, 6),
                                     "rejected": checked.rejected[:200]})
        return Proposal(source=checked.source or done.text, transformation=Transformation(f"llm_{prompt.kind}", params),
                        genome=genome, description=f"{model} via {prompt.template}",
                        rejected=checked.rejected, record=record)

    def _account(self, session_id: str, done: Completion) -> float:
        p_in, p_out = self._s.price_of(done.model)
        usd = (done.prompt_tokens * p_in + done.completion_tokens * p_out) / 1e6
        with self._lock:
            for u in (self.usage.setdefault(session_id, Usage()), self.total):
                u.requests += 1
                u.prompt_tokens += done.prompt_tokens
                u.completion_tokens += done.completion_tokens
                u.usd += usd
        return usd
