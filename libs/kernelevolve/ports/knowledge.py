"""The knowledge port: what a synthesizer or a strategy may read from the knowledge base.

Plain dataclasses so that the knowledge service's in-process base, a gRPC client of the
knowledge service and a test double implement one ``KnowledgeReader`` protocol and pass
one contract suite. Readers never write: distilling and retiring skills is the knowledge
service's own business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# Ordered from most general to most specific (kernelevolve.v1.KnowledgeLevel).
LEVELS: tuple[str, ...] = ("guidance", "hardware", "op_pattern", "skill")


@dataclass(frozen=True)
class RetrievedDoc:
    """One document retrieved for a prompt: ``hardware_kind``/``op_family`` empty = any."""

    doc_id: str
    level: str
    title: str
    text: str
    score: float = 0.0
    hardware_kind: str = ""
    op_family: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillHint:
    """A distilled skill as a reader sees it: which transformation paid off where, by how much.

    ``gain`` is the measured speedup ratio child/parent (1.0 = no gain) and
    ``gain_low``/``gain_high`` its interval; ``status`` is "active" or "demoted" (retired
    skills are never returned)."""

    skill_id: str
    transformation: str
    params: dict[str, str] = field(default_factory=dict)
    op_family: str = ""
    hardware_kind: str = ""
    gain: float = 1.0
    gain_low: float = 1.0
    gain_high: float = 1.0
    text: str = ""
    status: str = "active"
    # The precision contract the gain was timed under (kernelevolve.precision).
    precision: str = "default"


class KnowledgeReader(Protocol):
    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        """Documents ranked by similarity to ``query``; filtered by hardware (documents for
        any hardware match too), op family (same rule) and levels (empty = all)."""
        ...

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        """Active and demoted skills for this hardware (and op family when given, and
        precision contract when given), best measured gain first."""
        ...


class NoKnowledge:
    """The reader to inject when a session runs without a knowledge base: finds nothing."""

    name = "none"

    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        return []

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        return []
