"""Domain ⇄ protobuf translation is lossless for what the protos carry."""

from __future__ import annotations

import pytest

from ke_knowledge.convert import (
    doc_from_proto,
    doc_to_proto,
    level_from_proto,
    skill_from_proto,
    skill_to_proto,
)
from ke_knowledge.distill import distill_skill
from ke_knowledge.domain import LEVELS, Doc
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.v1 import common_pb2 as pb


def test_every_seed_document_round_trips() -> None:
    for doc in load_seed_documents():
        msg = doc_to_proto(doc)
        assert isinstance(msg, pb.KnowledgeDocument)
        assert doc_from_proto(msg) == doc


def test_levels_match_the_proto_enum() -> None:
    assert [level_from_proto(v) for v in (1, 2, 3, 4)] == list(LEVELS)
    assert doc_to_proto(Doc("s", "skill", "t", "x")).level == pb.KNOWLEDGE_LEVEL_SKILL
    assert level_from_proto(pb.KNOWLEDGE_LEVEL_UNSPECIFIED) is None
    with pytest.raises(InvalidArgumentError):
        level_from_proto(99)
    with pytest.raises(InvalidArgumentError):
        doc_from_proto(pb.KnowledgeDocument(doc_id="x", title="t", text="x"))


def test_skill_round_trips_its_proto_fields() -> None:
    skill = distill_skill("s1", "c2", "gelu_chain", "fuse", {"n": "3"}, 2.0, 1.0, "nvidia", interpreted=False)
    assert skill is not None
    back = skill_from_proto(skill_to_proto(skill))
    assert (back.skill_id, back.text, back.op_pattern, back.hardware_kind) == (
        skill.skill_id,
        skill.text,
        "gelu_chain",
        "nvidia",
    )
    assert (back.source_session_id, back.source_candidate_id) == ("s1", "c2")
