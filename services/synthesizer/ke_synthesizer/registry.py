"""Synthesizers by name (``synthesizer.kind``, ``--synthesizer``): one entry each, so
another synthesizer is added by registering its name here and nowhere else. An entry
says how to build the synthesizer, whether it reads the knowledge service, and how many
requests the service hands it at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelevolve.bus.port import EventBus
from kernelevolve.config import Settings
from kernelevolve.errors import ConfigError
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge
from kernelevolve.ports.synthesis import CandidateSynthesizer

# settings, what it may retrieve, the service's bus (the agent's ledger lives there)
Factory = Callable[[Settings, KnowledgeReader, EventBus | None], CandidateSynthesizer]


def _always(settings: Settings) -> bool:
    return True


def _one(settings: Settings) -> int:
    return 1


@dataclass(frozen=True)
class SynthesizerKind:
    make: Factory
    # Whether it needs a knowledge reader (prompts retrieve documents and skills).
    reads_knowledge: Callable[[Settings], bool] = _always
    # Requests handled at once; >1 for a synthesizer that waits on answers from outside.
    concurrency: Callable[[Settings], int] = _one


def _offline(settings: Settings, knowledge: KnowledgeReader, bus: EventBus | None = None) -> CandidateSynthesizer:
    from ke_synthesizer.offline import OfflineSynthesizer
    from ke_synthesizer.offline.families.impl_policy import ImplCache, ImplPolicy

    policy = ImplPolicy(ImplCache.load(settings.synthesizer.impl_cache) if settings.synthesizer.impl_cache else None)
    return OfflineSynthesizer(knowledge=knowledge, policy=policy)  # skills order its transformations


def _llm(settings: Settings, knowledge: KnowledgeReader, bus: EventBus | None = None) -> CandidateSynthesizer:
    from ke_synthesizer.composite import WithFallback
    from ke_synthesizer.llm import LlmSynthesizer, connect

    # Every endpoint's key is read here, once, from this process's environment.
    llm: CandidateSynthesizer = LlmSynthesizer(settings.llm, connect(settings.llm), knowledge=knowledge)
    if settings.llm.fallback == "offline":
        return WithFallback(llm, _offline(settings, knowledge))
    if settings.llm.fallback:
        raise ConfigError(f"unknown llm.fallback {settings.llm.fallback!r} (available: offline)")
    return llm


def _hybrid(settings: Settings, knowledge: KnowledgeReader, bus: EventBus | None = None) -> CandidateSynthesizer:
    from ke_synthesizer.composite import Hybrid

    return Hybrid(_offline(settings, knowledge), _llm(settings, knowledge))


def _agent(settings: Settings, knowledge: KnowledgeReader, bus: EventBus | None = None) -> CandidateSynthesizer:
    """Requests answered from outside through the ledger on the service's bus, each asked
    with the prompt the LLM synthesizer would send; built on the service's event loop."""
    import asyncio

    from ke_synthesizer.agent import AgentSynthesizer
    from ke_synthesizer.agent.prompt import llm_prompt
    from kernelevolve.agent_ledger import AgentLedger

    if bus is None:
        raise ConfigError("the agent synthesizer needs the service's bus (its requests are published there)")
    return AgentSynthesizer(AgentLedger(bus), settings.agent, prompt=llm_prompt(knowledge, settings.llm.prompt_tokens),
                            loop=asyncio.get_running_loop())


def _offline_reads_skills(settings: Settings) -> bool:
    return settings.learning.prior_skills > 0  # skills only, and only when priors are on


SYNTHESIZERS: dict[str, SynthesizerKind] = {
    "offline": SynthesizerKind(_offline, reads_knowledge=_offline_reads_skills),
    "llm": SynthesizerKind(_llm),
    "offline+llm": SynthesizerKind(_hybrid),
    "agent": SynthesizerKind(_agent, concurrency=lambda s: s.agent.concurrency),
}


def synthesizer_kind(settings: Settings) -> SynthesizerKind:
    kind = SYNTHESIZERS.get(settings.synthesizer.kind)
    if kind is None:
        raise ConfigError(f"unknown synthesizer kind {settings.synthesizer.kind!r} "
                          f"(available: {', '.join(sorted(SYNTHESIZERS))})")
    return kind


def make_synthesizer(settings: Settings, knowledge: KnowledgeReader | None = None,
                     bus: EventBus | None = None) -> CandidateSynthesizer:
    return synthesizer_kind(settings).make(settings, knowledge or NoKnowledge(), bus)
