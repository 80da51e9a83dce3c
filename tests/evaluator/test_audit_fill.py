"""The audit's replacement values are not predictable: a candidate that could recognise
them could tell the counterfactual run from a judged one."""

from __future__ import annotations

import pytest
import torch

from ke_evaluator.worker.arithmetic_audit import random_fill


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_two_fills_of_one_tensor_differ_and_keep_its_layout(dtype: torch.dtype) -> None:
    t = torch.zeros(3, 37, dtype=dtype)
    a, b = random_fill(t), random_fill(t)
    assert a.shape == t.shape and a.dtype == dtype and a.device == t.device
    assert not torch.equal(a, b)


def test_integer_fills_stay_in_range_as_their_own_values_shifted() -> None:
    t = torch.arange(10)
    assert sorted(random_fill(t).tolist()) == list(range(10))
