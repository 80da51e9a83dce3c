"""Knowledge documents and distilled skills, independent of protobuf and storage."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kernelevolve.errors import InvalidArgumentError

# Ordered from most general to most specific; mirrors kernelevolve.v1.KnowledgeLevel.
LEVELS: tuple[str, ...] = ("guidance", "hardware", "op_pattern", "skill")

# A skill's standing: active skills steer searches, demoted ones still do but weakly,
# retired ones are kept (with the reason) and never returned to readers.
SKILL_STATUSES: tuple[str, ...] = ("active", "demoted", "retired")


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise InvalidArgumentError(f"unknown knowledge level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


@dataclass(frozen=True)
class Doc:
    """One retrievable piece of knowledge. ``hardware_kind``/``op_family`` empty means any."""

    doc_id: str
    level: str
    title: str
    text: str
    tags: tuple[str, ...] = ()
    hardware_kind: str = ""
    op_family: str = ""

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
    """A lesson learned from one search step: a transformation that paid off, measured.

    ``gain`` is the candidate-time ratio parent/child (1.25 = the child takes 20 % less
    time) and ``gain_low``/``gain_high`` its interval from the two timings' confidence
    intervals; a skill exists only when ``gain_low`` > 1. ``provenance`` names where it
    was measured (device, torch, triton, driver, session, candidate).
    """

    skill_id: str
    title: str
    text: str
    op_pattern: str  # the operator spec's name
    hardware_kind: str
    source_session_id: str
    source_candidate_id: str
    transformation: str = ""
    params: dict[str, str] = field(default_factory=dict)
    op_family: str = ""
    shape_class: str = ""
    dtype: str = ""
    gain: float = 1.0
    gain_low: float = 1.0
    gain_high: float = 1.0
    before: str = ""
    after: str = ""
    provenance: dict[str, str] = field(default_factory=dict)
    status: str = "active"
    status_reason: str = ""
    confirmations: int = 0
    failures: int = 0
    # The precision contract its timings were taken under (kernelevolve.precision): a gain
    # measured against strict eager is no evidence against eager with TF32, and back.
    precision: str = "default"

    def __post_init__(self) -> None:
        if self.status not in SKILL_STATUSES:
            raise InvalidArgumentError(f"unknown skill status {self.status!r}")

    def to_doc(self) -> Doc:
        tags = tuple(t for t in ("skill", self.op_pattern, self.op_family, self.transformation) if t)
        return Doc(self.skill_id, "skill", self.title, self.text, tags, self.hardware_kind, self.op_family)

    def with_status(self, status: str, reason: str) -> Skill:
        return replace(self, status=status, status_reason=reason)

    def to_payload(self) -> dict[str, Any]:
        """The skill's fields as stored beside its document in the vector index."""
        return {
            "skill_id": self.skill_id, "title": self.title, "text": self.text, "op_pattern": self.op_pattern,
            "hardware_kind": self.hardware_kind, "source_session_id": self.source_session_id,
            "source_candidate_id": self.source_candidate_id, "transformation": self.transformation,
            "params": dict(self.params), "op_family": self.op_family, "shape_class": self.shape_class,
            "dtype": self.dtype, "gain": self.gain, "gain_low": self.gain_low, "gain_high": self.gain_high,
            "before": self.before, "after": self.after, "provenance": dict(self.provenance),
            "status": self.status, "status_reason": self.status_reason,
            "confirmations": self.confirmations, "failures": self.failures, "precision": self.precision,
        }

    @staticmethod
    def from_payload(data: dict[str, Any]) -> Skill:
        known = Skill.__dataclass_fields__
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["params"] = {str(k): str(v) for k, v in (data.get("params") or {}).items()}
        kwargs["provenance"] = {str(k): str(v) for k, v in (data.get("provenance") or {}).items()}
        # Skills stored before contracts existed were all timed with TF32 off.
        kwargs["precision"] = str(data.get("precision") or "strict")
        return Skill(**kwargs)
