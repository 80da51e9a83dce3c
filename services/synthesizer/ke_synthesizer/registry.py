"""Synthesizers by name (``synthesizer.kind``, ``--synthesizer``): one factory each, so
another synthesizer (``agent``) is added by registering its name here."""

from __future__ import annotations

from collections.abc import Callable

from kernelevolve.config import Settings
from kernelevolve.errors import ConfigError
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge
from kernelevolve.ports.synthesis import CandidateSynthesizer

Factory = Callable[[Settings, KnowledgeReader], CandidateSynthesizer]


def _offline(settings: Settings, knowledge: KnowledgeReader) -> CandidateSynthesizer:
    from ke_synthesizer.offline import OfflineSynthesizer

    return OfflineSynthesizer(knowledge=knowledge)  # skills order its transformations


def _llm(settings: Settings, knowledge: KnowledgeReader) -> CandidateSynthesizer:
    from ke_synthesizer.composite import WithFallback
    from ke_synthesizer.llm import LlmSynthesizer, connect

    # Every endpoint's key is read here, once, from this process's environment.
    llm: CandidateSynthesizer = LlmSynthesizer(settings.llm, connect(settings.llm), knowledge=knowledge)
    if settings.llm.fallback == "offline":
        return WithFallback(llm, _offline(settings, knowledge))
    if settings.llm.fallback:
        raise ConfigError(f"unknown llm.fallback {settings.llm.fallback!r} (available: offline)")
    return llm


def _hybrid(settings: Settings, knowledge: KnowledgeReader) -> CandidateSynthesizer:
    from ke_synthesizer.composite import Hybrid

    return Hybrid(_offline(settings, knowledge), _llm(settings, knowledge))


SYNTHESIZERS: dict[str, Factory] = {"offline": _offline, "llm": _llm, "offline+llm": _hybrid}


def make_synthesizer(settings: Settings, knowledge: KnowledgeReader | None = None) -> CandidateSynthesizer:
    factory = SYNTHESIZERS.get(settings.synthesizer.kind)
    if factory is None:
        raise ConfigError(f"unknown synthesizer kind {settings.synthesizer.kind!r} "
                          f"(available: {', '.join(sorted([*SYNTHESIZERS, 'agent']))})")  # agent: needs the bus
    return factory(settings, knowledge or NoKnowledge())
