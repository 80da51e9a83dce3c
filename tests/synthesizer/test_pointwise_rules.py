"""The pointwise emitter's op table: every op the normaliser calls pointwise has a rule,
and a rule's helper use is recorded (the code itself is pinned by the golden kernels)."""

from __future__ import annotations

from ke_synthesizer.offline.emit.lower_pointwise import RULES, PointwiseEmitter
from ke_synthesizer.offline.frontend.ops import POINTWISE, NormOp


def test_every_pointwise_op_has_a_rule() -> None:
    assert set(POINTWISE) <= set(RULES)


def test_rules_write_expressions_and_record_helpers() -> None:
    em = PointwiseEmitter()
    assert em.emit(NormOp("relu", {"input": "x"}), str) == "tl.maximum(x, 0.0)"
    assert em.helpers == set()
    assert em.emit(NormOp("mish", {"input": "x"}), str) == "x * _tanh(tl.where(x > 20.0, x, _softplus(x)))"
    assert em.helpers == {"_tanh", "_softplus"}
    assert em.emit(NormOp("sub", {"input": "x", "other": "y", "alpha": 2}), str) == "(x - (y * 2.0))"
    assert em.emit(NormOp("div", {"input": "x", "other": "y", "rounding_mode": "floor"}), str) == \
        "_floor_divide(x, y)"
    assert {"_floor_divide", "_fmod", "_signbit"} <= em.helpers
    assert em.emit(NormOp("div", {"input": "x", "other": "y", "rounding_mode": "up"}), str) is None
    assert em.emit(NormOp("no_such_op", {"input": "x"}), str) is None
