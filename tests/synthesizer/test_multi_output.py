"""Operators with several outputs (frontend/multi_output.py): var_mean, std_mean,
aminmax and max / min with a dim, returned as they are or unpacked, lower to Triton
kernels only and match torch (values and indices)."""

from __future__ import annotations

import operator

import pytest
import torch

from ke_synthesizer.offline.frontend.capture import capture
from tests.synthesizer.conftest import candidate_and_reference, triton_seed

SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''

CASES = [
    "return torch.var_mean(x, dim=1)",
    "return torch.var_mean(x, 1, True, True)",
    "return torch.var_mean(x, True)",
    "return torch.std_mean(x, dim=(0, 1), correction=0)",
    "v, m = torch.std_mean(x, -1, keepdim=True)\n        return v * m",
    "return torch.aminmax(x)",
    "return torch.aminmax(x, dim=0, keepdim=True)",
    "return torch.max(x, 1)",
    "return torch.min(x, -1, keepdim=True)",
    "values, indices = torch.max(x, 0)\n        return values + 1.0, indices",
]


def _same(got: object, want: object) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
        return
    assert isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)) and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


@pytest.mark.parametrize("shape", ["7, 33", "1, 1000", "5, 1"])
@pytest.mark.parametrize("body", CASES)
def test_multi_output_ops_lower_and_match(body: str, shape: str) -> None:
    src = SPEC.format(body=body, shape=shape)
    _same(*candidate_and_reference(src, triton_seed(src, "multi").source))


def test_a_returned_tuple_becomes_one_node_per_element() -> None:
    spec = capture(SPEC.format(body="return torch.var_mean(x, dim=1)", shape="4, 6"), "multi")
    calls = [n for n in spec.gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [torch.var, torch.mean]
    (out,) = [n for n in spec.gm.graph.nodes if n.op == "output"]
    assert out.args == (tuple(calls),)
    spec = capture(SPEC.format(body="return torch.max(x, 1)", shape="4, 6"), "multi")
    getitems = [n for n in spec.gm.graph.nodes if n.target is operator.getitem]
    assert sorted(n.args[1] for n in getitems) == [0, 1]
