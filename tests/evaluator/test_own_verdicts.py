"""Verdicts the evaluator makes itself: an activation whose inputs make it the identity is
judged by what its kernel does (worker/defenses.py, ``_off_identity``), bool intermediates
and outputs, integer and index outputs are judged exactly, complex outputs by their real and
imaginary parts, and a spec that only views its inputs ends at validation with one line.
Specs and candidates: verdict_sources.py."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
from kernelevolve.errors import NothingToComputeError

from . import verdict_sources as src

SHAPES = ["1", "7", "33, 7", "1000"]


def _activation(name: str, shape: str) -> str:
    return src.ACTIVATION_SPEC.format(expr=src.ACTIVATIONS[name][0], shape=shape)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(src.ACTIVATIONS))
def test_an_activation_that_is_the_identity_on_its_inputs_is_judged_by_what_its_kernel_does(
        judge: Judge, name: str, shape: str) -> None:
    v = judge.evaluate(_activation(name, shape), src.ACTIVATION_CANDIDATE.format(body=src.ACTIVATIONS[name][1]),
                       candidate_id=name)
    assert v.status == "correct", v.reason
    audit = v.evidence["kernel_arithmetic"]
    assert audit["computing"] == 0  # on uniform [0, 1) its writes are its input's values ...
    off = audit["off_identity"]  # ... and on inputs where the operator is no identity it computes
    assert off["computing"] == 1 and off["computed_values_reach_output"] is True, off


COPIES = {
    # the library computes, a kernel copies its result: a copy on any inputs
    "library_copy": (src.COPY_CANDIDATE, "its kernels still only move data"),
    # a copy where the library's result is non-negative (all of it on the given inputs),
    # its own arithmetic elsewhere: wrong where it is negative (leaky ReLU, ELU, hardtanh),
    # still a copy where the library's result never is (ReLU)
    "copy_when_nonnegative": (src.COPY_WHEN_NONNEGATIVE, "where the operator is not the identity"),
    # a kernel that copies its input: right on the given inputs only
    "identity_kernel": (src.IDENTITY_KERNEL, "its output is wrong"),
}


@pytest.mark.parametrize("cheat", sorted(COPIES))
@pytest.mark.parametrize("name", sorted(src.ACTIVATIONS))
def test_copies_stay_rejected_on_inputs_where_the_operator_is_the_identity(judge: Judge, name: str,
                                                                          cheat: str) -> None:
    template, why = COPIES[cheat]
    torch_expr = src.ACTIVATIONS[name][0].replace("F.", "torch.nn.functional.")
    v = judge.evaluate(_activation(name, "33, 7"), template.format(torch_expr=torch_expr), candidate_id=cheat)
    assert v.status == "rejected", v.reason
    assert "only move data" in v.reason and why in v.reason, v.reason
    assert "off_identity" not in v.evidence["kernel_arithmetic"]


def test_a_relu_in_a_kernel_after_a_library_matmul_is_a_partial_fallback(judge: Judge) -> None:
    """A product of non-negative matrices is non-negative: the ReLU after it is the identity
    on the given inputs, and the candidate's own kernel does it. It is judged as the same
    candidate is on signed inputs (a partial library fallback: correct), not as a copy."""
    spec = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.rand(9, 17), torch.rand(17, 5)]


def get_init_inputs():
    return []
'''
    candidate = src.HEADER + '''

@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        h = (a @ b).contiguous()
        y = torch.empty_like(h)
        _relu[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        return y
'''
    v = judge.evaluate(spec, candidate, candidate_id="mm_relu")
    assert v.status == "correct", v.reason
    assert v.evidence["kernel_arithmetic"]["off_identity"]["computing"] == 1


@pytest.mark.parametrize("shape", ["1, 1", "7, 33", "3, 1000"])
def test_a_masked_mean_whose_kernel_writes_a_bool_mask(judge: Judge, shape: str) -> None:
    v = judge.evaluate(src.MASKED_MEAN_SPEC.format(shape=shape), src.MASKED_MEAN_CANDIDATE, candidate_id="masked")
    assert v.status == "correct", v.reason
    moves = v.evidence["kernel_arithmetic"].get("moves_only", [])
    assert not any("_keep" in m for m in moves), moves  # writing the mask is arithmetic


@pytest.mark.parametrize("shape", ["1", "33", "1000"])
@pytest.mark.parametrize("op", sorted(src.COMPARISONS))
def test_comparisons_with_bool_outputs_are_judged_exactly(judge: Judge, op: str, shape: str) -> None:
    spec = src.COMPARISON_SPEC.format(op=op, shape=shape)
    v = judge.evaluate(spec, src.COMPARISON_CANDIDATE.format(expr=src.COMPARISONS[op]), candidate_id=op)
    assert v.status == "correct", v.reason
    assert "equal (bool: judged exactly)" in v.reason
    # the opposite comparison is wrong wherever a != b (the inputs tie a seventh of the time)
    opposite = {"eq": "a != b", "ne": "a == b", "ge": "a < b", "gt": "a <= b", "le": "a > b", "lt": "a >= b"}[op]
    if shape != "1":
        bad = judge.evaluate(spec, src.COMPARISON_CANDIDATE.format(expr=opposite), candidate_id=f"not_{op}")
        assert bad.status == "incorrect" and "bool values differ" in bad.reason, bad.reason


INDEX_FILL = {"argmax": "-float('inf')", "argmin": "float('inf')"}


@pytest.mark.parametrize("shape", ["1, 33", "1, 1", "7, 33", "3, 1000"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_index_outputs_of_a_fully_triton_argmax_or_argmin(judge: Judge, op: str, shape: str) -> None:
    spec = src.INDEX_SPEC.format(op=op, shape=shape)
    v = judge.evaluate(spec, src.INDEX_CANDIDATE.format(op=op, fill=INDEX_FILL[op], wrong=""), candidate_id=op)
    assert v.status == "correct", v.reason
    assert "equal (integer (int64): judged exactly)" in v.reason
    audit = v.evidence["kernel_arithmetic"]
    # one column: the index (0) is the input cast to int64 as well, a move on these inputs
    # (computed on others, off_identity)
    reach = audit.get("computed_values_reach_output", audit.get("off_identity", {}).get("computed_values_reach_output"))
    assert reach is True, audit


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_a_wrong_index_is_incorrect(judge: Judge, op: str) -> None:
    spec = src.INDEX_SPEC.format(op=op, shape="7, 33")
    v = judge.evaluate(spec, src.INDEX_CANDIDATE.format(op=op, fill=INDEX_FILL[op], wrong=" + 1"), candidate_id=op)
    assert v.status == "incorrect", v.reason
    assert "integer (int64) values differ (7 of 7 elements; e.g. flat index 0" in v.reason, v.reason


@pytest.mark.parametrize("shape", ["1", "7", "1000"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_outputs_are_judged_exactly(judge: Judge, dtype: str, shape: str) -> None:
    spec = src.INTEGER_SPEC.format(dtype=dtype, shape=shape)
    v = judge.evaluate(spec, src.INTEGER_CANDIDATE.format(wrong=""), candidate_id=dtype)
    assert v.status == "correct", v.reason
    assert f"equal (integer ({dtype}): judged exactly)" in v.reason
    off_by_one = judge.evaluate(spec, src.INTEGER_CANDIDATE.format(wrong=" + 1"), candidate_id=f"{dtype}_wrong")
    assert off_by_one.status == "incorrect" and f"integer ({dtype}) values differ" in off_by_one.reason


@pytest.mark.parametrize("shape", ["1", "7, 33", "1000"])
def test_complex_outputs_are_judged_by_their_real_and_imaginary_parts(judge: Judge, shape: str) -> None:
    spec = src.COMPLEX_SPEC.format(shape=shape)
    check = judge.validate_spec(spec, "complex")
    assert check.ok, check.reason
    v = judge.evaluate(spec, src.COMPLEX_CANDIDATE.format(wrong=""), candidate_id="complex")
    assert v.status == "correct", v.reason
    # the imaginary part off by 1e-2: outside the fp32 tolerance
    bad = judge.evaluate(spec, src.COMPLEX_CANDIDATE.format(wrong=" + 0.01"), candidate_id="complex_wrong")
    assert bad.status == "incorrect", bad.reason
    assert "(real and imaginary parts) mismatch" in bad.reason, bad.reason


@pytest.mark.parametrize("name", sorted(src.VIEW_SPECS))
def test_a_spec_that_only_views_its_inputs_has_nothing_to_compute(judge: Judge, name: str) -> None:
    expr, make = src.VIEW_SPECS[name]
    check = judge.validate_spec(src.VIEW_SPEC.format(expr=expr, make=make), name)
    assert not check.ok and check.nothing_to_compute and not check.resource_limited
    assert check.reason.startswith("nothing to compute: the reference only reshapes its inputs"), check.reason
    with pytest.raises(NothingToComputeError, match=f"^{name}.py: nothing to compute: the reference only reshapes"):
        check.raise_if_failed(f"{name}.py")


def test_a_copy_of_a_view_is_something_to_compute(judge: Judge) -> None:
    """A transpose made contiguous writes new memory: a kernel can do it, the spec is valid."""
    check = judge.validate_spec(src.VIEW_SPEC.format(expr="x.t().contiguous()", make="torch.randn(5, 7)"), "t")
    assert check.ok and not check.nothing_to_compute, check.reason
