"""Knowledge documents and distilled skills, independent of protobuf and storage."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelevolve.errors import InvalidArgumentError

# Ordered from most general to most specific; mirrors kernelevolve.v1.KnowledgeLevel.
LEVELS: tuple[str, ...] = ("guidance", "hardware", "op_pattern", "skill")


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise InvalidArgumentError(f"unknown knowledge level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


@dataclass(frozen=True)
class Doc:
    """One retrievable piece of knowledge. ``hardware_kind`` empty means any hardware."""

    doc_id: str
    level: str
    title: str
    text: str
    tags: tuple[str, ...] = ()
    hardware_kind: str = ""

    def __post_init__(self) -> None:
        if not self.doc_id:
            raise InvalidArgumentError("a knowledge document needs a doc_id")
        check_level(self.level)
        object.__setattr__(self, "tags", tuple(self.tags))

    def embedding_text(self) -> str:
        """What gets embedded: the title carries most of the meaning for short documents."""
        tags = f"\nTags: {', '.join(self.tags)}" if self.tags else ""
        return f"{self.title}\n{self.text}{tags}"


@dataclass(frozen=True)
class Skill:
    """A lesson learned from one search step: a transformation that paid off somewhere."""

    skill_id: str
    title: str
    text: str
    op_pattern: str  # the operator spec's name
    hardware_kind: str
    source_session_id: str
    source_candidate_id: str
    transformation: str = ""
    params: dict[str, str] = field(default_factory=dict)
    speedup: float = 0.0
    parent_speedup: float = 0.0

    def to_doc(self) -> Doc:
        tags = tuple(t for t in ("skill", self.op_pattern, self.transformation) if t)
        return Doc(self.skill_id, "skill", self.title, self.text, tags, self.hardware_kind)
