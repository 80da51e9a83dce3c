"""Domain ⇄ protobuf translation is lossless for what the protos carry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ke_knowledge.convert import (
    doc_from_proto,
    doc_to_proto,
    level_from_proto,
    measurement_from_result,
    skill_from_proto,
    skill_to_proto,
)
from ke_knowledge.distill import SkillContext, distill_skill
from ke_knowledge.domain import LEVELS, Doc, Skill
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.v1 import common_pb2 as pb
from tests.knowledge.gpu_results import gpu_result


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


def test_skill_round_trips_losslessly() -> None:
    parent, child = measurement_from_result(gpu_result("p", 2.0)), measurement_from_result(gpu_result("c2", 1.0))
    skill = distill_skill("s1", "c2", SkillContext("gelu_chain", "pointwise", "large", "float16", "nvidia"), "fusion",
                          {"group": "", "value": "greedy"}, parent, child, before="fusion=none", after="fusion=greedy")
    assert skill is not None
    skill = replace(skill, status="demoted", status_reason="triton changed", confirmations=2, failures=1)
    assert skill_from_proto(skill_to_proto(skill)) == skill
    assert Skill.from_payload(skill.to_payload()) == skill
