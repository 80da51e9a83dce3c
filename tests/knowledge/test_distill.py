"""Skill distillation: only clear wins between correct kernels become skills."""

from __future__ import annotations

import math

import pytest

from ke_knowledge.distill import distill_skill


def _distill(speedup: float, parent: float, **kw: object):
    args = dict(
        session_id="s1",
        candidate_id="c7",
        spec_name="softmax_rows",
        transformation_name="change_block_size",
        params={"BLOCK": "2048", "num_warps": "8"},
        speedup=speedup,
        parent_speedup=parent,
        hardware_kind="nvidia",
        interpreted=False,
    )
    args.update(kw)
    return distill_skill(**args)  # type: ignore[arg-type]


def test_clear_win_becomes_a_skill() -> None:
    skill = _distill(1.32, 1.10)
    assert skill is not None
    assert skill.text == (
        "On nvidia, for softmax_rows, change_block_size(BLOCK=2048, num_warps=8) "
        "improved speedup from 1.10x to 1.32x (+20%)."
    )
    assert skill.op_pattern == "softmax_rows"
    assert (skill.hardware_kind, skill.transformation) == ("nvidia", "change_block_size")
    assert (skill.source_session_id, skill.source_candidate_id) == ("s1", "c7")
    doc = skill.to_doc()
    assert doc.level == "skill" and doc.doc_id == skill.skill_id and "softmax_rows" in doc.tags


def test_skill_id_is_stable_per_candidate() -> None:
    a, b = _distill(2.0, 1.0), _distill(3.0, 1.0)
    other = _distill(2.0, 1.0, candidate_id="c8")
    assert a is not None and b is not None and other is not None
    assert a.skill_id == b.skill_id != other.skill_id


@pytest.mark.parametrize(
    ("speedup", "parent"),
    [
        (1.04, 1.0),  # below the 5 % bar: noise
        (0.9, 1.0),  # slower
        (0.0, 1.0),  # child incorrect
        (1.5, 0.0),  # parent incorrect: a fix, not a speed lesson
        (math.nan, 1.0),
        (math.inf, 1.0),
    ],
)
def test_no_skill_without_a_clear_win(speedup: float, parent: float) -> None:
    assert _distill(speedup, parent) is None


def test_threshold_is_inclusive_and_tunable() -> None:
    assert _distill(1.05, 1.0) is not None
    assert _distill(1.08, 1.0, min_gain=0.10) is None


def test_unknown_hardware_reads_naturally() -> None:
    skill = _distill(2.0, 1.0, hardware_kind="", params={})
    assert skill is not None
    assert skill.text.startswith("On any hardware, for softmax_rows, change_block_size()")


def test_interpreter_timings_never_become_a_skill() -> None:
    assert _distill(3.0, 1.0, hardware_kind="cpu") is not None  # a CPU timed natively would count
    assert _distill(3.0, 1.0, hardware_kind="cpu", interpreted=True) is None
