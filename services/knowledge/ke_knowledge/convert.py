"""Translation between the domain dataclasses and ``kernelevolve.v1`` messages.

Kept here, next to the domain, so the gRPC servicer and the NATS handler translate the
same way and contain no mapping logic of their own.
"""

from __future__ import annotations

from ke_knowledge.distill import Measurement
from ke_knowledge.domain import Doc, Skill, check_level
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.v1 import common_pb2 as pb

_TO_PROTO: dict[str, int] = {
    "guidance": pb.KNOWLEDGE_LEVEL_GUIDANCE,
    "hardware": pb.KNOWLEDGE_LEVEL_HARDWARE,
    "op_pattern": pb.KNOWLEDGE_LEVEL_OP_PATTERN,
    "skill": pb.KNOWLEDGE_LEVEL_SKILL,
}
_FROM_PROTO: dict[int, str] = {v: k for k, v in _TO_PROTO.items()}


def level_to_proto(level: str) -> int:
    return _TO_PROTO[check_level(level)]


def level_from_proto(value: int) -> str | None:
    """None for UNSPECIFIED (a query that does not filter by level)."""
    if value == pb.KNOWLEDGE_LEVEL_UNSPECIFIED:
        return None
    try:
        return _FROM_PROTO[value]
    except KeyError:
        raise InvalidArgumentError(f"unknown KnowledgeLevel {value}") from None


def doc_to_proto(doc: Doc) -> pb.KnowledgeDocument:
    return pb.KnowledgeDocument(
        doc_id=doc.doc_id,
        level=level_to_proto(doc.level),  # type: ignore[arg-type]
        title=doc.title,
        text=doc.text,
        tags=list(doc.tags),
        hardware_kind=doc.hardware_kind,
        op_family=doc.op_family,
    )


def doc_from_proto(msg: pb.KnowledgeDocument) -> Doc:
    level = level_from_proto(msg.level)
    if level is None:
        raise InvalidArgumentError(f"knowledge document {msg.doc_id!r} has no level")
    return Doc(msg.doc_id, level, msg.title, msg.text, tuple(msg.tags), msg.hardware_kind, msg.op_family)


def skill_to_proto(skill: Skill) -> pb.Skill:
    return pb.Skill(
        skill_id=skill.skill_id,
        title=skill.title,
        text=skill.text,
        op_pattern=skill.op_pattern,
        hardware_kind=skill.hardware_kind,
        source_session_id=skill.source_session_id,
        source_candidate_id=skill.source_candidate_id,
        detail=pb.SkillDetail(
            transformation=pb.Transformation(name=skill.transformation, params=skill.params),
            op_family=skill.op_family, shape_class=skill.shape_class, dtype=skill.dtype,
            gain=skill.gain, gain_low=skill.gain_low, gain_high=skill.gain_high,
            before=skill.before, after=skill.after, provenance=skill.provenance,
            status=skill.status, status_reason=skill.status_reason,
            confirmations=skill.confirmations, failures=skill.failures, precision=skill.precision,
        ),
    )


def skill_from_proto(msg: pb.Skill) -> Skill:
    d = msg.detail
    return Skill(
        skill_id=msg.skill_id,
        title=msg.title,
        text=msg.text,
        op_pattern=msg.op_pattern,
        hardware_kind=msg.hardware_kind,
        source_session_id=msg.source_session_id,
        source_candidate_id=msg.source_candidate_id,
        transformation=d.transformation.name,
        params=dict(d.transformation.params),
        op_family=d.op_family,
        shape_class=d.shape_class,
        dtype=d.dtype,
        gain=d.gain or 1.0,
        gain_low=d.gain_low or 1.0,
        gain_high=d.gain_high or 1.0,
        before=d.before,
        after=d.after,
        provenance=dict(d.provenance),
        status=d.status or "active",
        status_reason=d.status_reason,
        confirmations=d.confirmations,
        failures=d.failures,
        precision=d.precision or "strict",  # a skill sent before contracts existed was timed strict
    )


def measurement_from_result(result: pb.EvaluationResult) -> Measurement:
    t = result.candidate_timing
    return Measurement(result.candidate_id, t.median_ms, t.ci_low_ms, t.ci_high_ms, result.interpreted,
                       result.hardware.kind, dict(result.fingerprint))
