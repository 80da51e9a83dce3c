"""A skill is demoted, then retired, when its gain does not reproduce or its provenance no
longer matches the environment; the reason is kept, and a confirmation restores it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ke_knowledge.convert import measurement_from_result
from ke_knowledge.distill import SkillContext, distill_skill, measure_gain
from ke_knowledge.domain import Skill
from ke_knowledge.lifecycle import major_minor, provenance_mismatch, retire, review_environment, review_measurement
from tests.knowledge.gpu_results import H100, gpu_result

CTX = SkillContext("gelu_bias", "pointwise", "medium", "float16", "nvidia")


def _skill() -> Skill:
    parent = measurement_from_result(gpu_result("p", 1.0))
    child = measurement_from_result(gpu_result("c", 0.8))
    skill = distill_skill("s1", "c", CTX, "num_warps", {"group": "g0", "value": "8"}, parent, child)
    assert skill is not None
    return skill


def _gain(parent_ms: float, child_ms: float, spread: float = 0.01):
    gain = measure_gain(measurement_from_result(gpu_result("p", parent_ms, spread=spread)),
                        measurement_from_result(gpu_result("c", child_ms, spread=spread)))
    assert gain is not None
    return gain


def test_gain_that_disappears_demotes_then_retires_with_reason() -> None:
    skill = _skill()
    once = review_measurement(skill, _gain(1.0, 0.99, spread=0.05), "session s2 candidate r1-0")
    assert once.status == "demoted" and once.failures == 1
    assert "not reproduced by session s2 candidate r1-0" in once.status_reason
    twice = review_measurement(once, _gain(1.0, 1.02), "session s3 candidate r2-1")
    assert twice.status == "retired" and "session s3" in twice.status_reason
    assert review_measurement(twice, _gain(1.0, 0.5), "session s4") == twice  # retired stays retired


def test_confirmation_restores_a_demoted_skill() -> None:
    demoted = review_measurement(_skill(), _gain(1.0, 1.0), "session s2")
    confirmed = review_measurement(demoted, _gain(1.0, 0.8), "session s3")
    assert confirmed.status == "active" and confirmed.confirmations == 1
    assert confirmed.status_reason == "confirmed by session s3"


@pytest.mark.parametrize(("change", "why"), [
    ({"device_name": "NVIDIA A100-SXM4-80GB"}, "device changed"),
    ({"torch": "2.6.0+cu126"}, "torch changed"),
    ({"triton": "3.2.0"}, "triton changed"),
])
def test_environment_change_demotes_then_retires(change: dict[str, str], why: str) -> None:
    now = dict(H100, **change)
    skill = _skill()
    assert why in provenance_mismatch(skill, now)
    first = review_environment(skill, now, "s2")
    assert first.status == "demoted" and why in first.status_reason
    assert review_environment(first, now, "s2") == first  # one strike per session
    second = review_environment(first, now, "s3")
    assert second.status == "retired" and "session s3" in second.status_reason


def test_patch_releases_and_missing_keys_do_not_count() -> None:
    skill = _skill()
    assert provenance_mismatch(skill, dict(H100, torch="2.5.0", triton="3.1.1", driver="560.1")) == ""
    assert provenance_mismatch(replace(skill, provenance={}), dict(H100, device_name="other")) == ""
    assert review_environment(skill, H100, "s2") == skill
    assert (major_minor("2.5.1+cu124"), major_minor("3"), major_minor("3.1")) == ("2.5", "3", "3.1")


def test_retire_by_hand_keeps_the_reason() -> None:
    r = retire(_skill(), "wrong on odd shapes")
    assert (r.status, r.status_reason) == ("retired", "wrong on odd shapes")
