"""Skill distillation: only CI-separated wins timed on real hardware become skills."""

from __future__ import annotations

import math

import pytest

from ke_knowledge.convert import measurement_from_result
from ke_knowledge.distill import Measurement, SkillContext, distill_skill, measure_gain
from tests.knowledge.gpu_results import H100, gpu_result

CTX = SkillContext("softmax_rows", "reduction", "small", "float32", "nvidia")


def _distill(parent_ms: float, child_ms: float, spread: float = 0.01, **kw: object):
    parent = measurement_from_result(gpu_result("p", parent_ms, spread=spread, **kw))  # type: ignore[arg-type]
    child = measurement_from_result(gpu_result("c7", child_ms, spread=spread, **kw))  # type: ignore[arg-type]
    return distill_skill("s1", "c7", CTX, "BLOCK_SIZE", {"group": "g0", "value": "2048"}, parent, child,
                         before="g0.BLOCK_SIZE=1024", after="g0.BLOCK_SIZE=2048")


def test_separated_win_becomes_a_skill_with_context_gain_and_provenance() -> None:
    skill = _distill(0.132, 0.110)
    assert skill is not None
    assert skill.gain == pytest.approx(0.132 / 0.110)
    assert skill.gain_low == pytest.approx(0.132 * 0.99 / (0.110 * 1.01))
    assert skill.gain_high == pytest.approx(0.132 * 1.01 / (0.110 * 0.99))
    assert 1.0 < skill.gain_low < skill.gain < skill.gain_high
    assert (skill.op_family, skill.shape_class, skill.dtype, skill.hardware_kind) == (
        "reduction", "small", "float32", "nvidia")
    assert (skill.transformation, skill.params) == ("BLOCK_SIZE", {"group": "g0", "value": "2048"})
    assert (skill.before, skill.after) == ("g0.BLOCK_SIZE=1024", "g0.BLOCK_SIZE=2048")
    assert skill.provenance == {"device_name": H100["device_name"], "torch": H100["torch"],
                                "triton": H100["triton"], "driver": H100["driver"], "cuda": H100["cuda"],
                                "session": "s1", "candidate": "c7"}
    assert skill.status == "active"
    assert "H100" in skill.text and "softmax_rows" in skill.text
    doc = skill.to_doc()
    assert doc.level == "skill" and doc.doc_id == skill.skill_id and doc.op_family == "reduction"


def test_skill_id_is_stable_per_context_and_transformation() -> None:
    a, b = _distill(2.0, 1.0), _distill(3.0, 1.0)
    assert a is not None and b is not None and a.skill_id == b.skill_id
    parent, child = (measurement_from_result(gpu_result(c, ms)) for c, ms in (("p", 2.0), ("c", 1.0)))
    other = distill_skill("s1", "c", SkillContext("softmax_rows", "reduction", "large", "float32", "nvidia"),
                          "BLOCK_SIZE", {"group": "g0", "value": "2048"}, parent, child)
    assert other is not None and other.skill_id != a.skill_id


@pytest.mark.parametrize(("parent_ms", "child_ms", "spread"), [
    (1.00, 0.97, 0.001),  # separated but below the 5 % bar
    (1.00, 0.90, 0.08),  # 10 % faster by the medians, but the intervals overlap
    (1.00, 1.10, 0.01),  # slower
    (1.00, math.nan, 0.01),
    (1.00, math.inf, 0.01),
    (0.0, 0.5, 0.01),  # no timing for the parent
])
def test_no_skill_without_a_separated_win(parent_ms: float, child_ms: float, spread: float) -> None:
    assert _distill(parent_ms, child_ms, spread) is None


@pytest.mark.parametrize("interpreted_side", ["child", "parent", "both"])
def test_no_skill_can_come_from_interpreter_timings(interpreted_side: str) -> None:
    """However large the apparent win: Triton's CPU interpreter times correctness checks."""
    cpu = {"device": "cpu", "triton_interpret": "1", "torch": "2.5.1", "triton": "3.1.0"}
    parent = measurement_from_result(gpu_result("p", 50.0, fingerprint=cpu, kind="cpu",
                                                interpreted=interpreted_side in ("parent", "both")))
    child = measurement_from_result(gpu_result("c", 5.0, fingerprint=cpu, kind="cpu",
                                               interpreted=interpreted_side in ("child", "both")))
    assert measure_gain(parent, child) is None
    assert distill_skill("s1", "c", CTX, "BLOCK_SIZE", {"value": "64"}, parent, child) is None


def test_no_skill_across_devices() -> None:
    a100 = dict(H100, device_name="NVIDIA A100-SXM4-80GB")
    parent = measurement_from_result(gpu_result("p", 2.0, fingerprint=a100))
    child = measurement_from_result(gpu_result("c", 1.0))
    assert distill_skill("s1", "c", CTX, "BLOCK_SIZE", {"value": "64"}, parent, child) is None


def test_measurement_rejects_inverted_intervals() -> None:
    m = Measurement("c", 1.0, 1.2, 1.1, False)
    assert not m.usable()
