"""Capture takes any forward whose reference runs with static shapes: plain symbolic
tracing, then buffers as graph values (``self.mask[:, :, :T, :T]``), then shapes fixed to
the example inputs; only a branch on tensor values is refused, with both reasons."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.capture import capture
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import ProposalRequest

_TAIL = """

def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""

LOOP_OVER_SIZE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        acc = torch.zeros_like(x[:, 0])
        outs = []
        for i in range(x.size(1)):  # Python loop over a size: unrolled for the example's size
            acc = acc * 0.5 + torch.tanh(x[:, i])
            outs.append(acc)
        return torch.stack(outs, dim=1)
"""

LEAF_WITH_SUBMODULES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                                batch_first=True)

    def forward(self, x):
        h = self.layer(x)
        return sum(h[:, i] for i in range(h.shape[1]))  # the leaf runs its own submodules
"""

VALUE_BRANCH = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x
"""


def test_a_forward_looping_over_a_size_is_specialised_and_says_so(judge: Judge) -> None:
    spec = LOOP_OVER_SIZE + _TAIL.format(shape="3, 5, 7")
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name="loop_over_size", count=1))
    assert "Specialised for input shapes [3, 5, 7]" in prop.source
    verdict = judge.evaluate(spec, prop.source, "loop")
    assert verdict.status == "correct", verdict.reason


@pytest.mark.parametrize("shape", ["2, 3, 16", "1, 5, 16"])
def test_a_leaf_module_is_run_untraced_while_shapes_are_fixed(shape: str) -> None:
    spec = capture(LEAF_WITH_SUBMODULES + _TAIL.format(shape=shape), "leaf")
    assert spec.specialized_shapes == [tuple(int(s) for s in shape.split(", "))]
    assert any(n.op == "call_module" and n.target == "layer" for n in spec.gm.graph.nodes)
    assert not any(str(n.target).startswith("layer.") for n in spec.gm.graph.nodes)  # not traced into


def test_a_buffer_sliced_by_a_traced_size_stays_general() -> None:
    spec = capture("""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(16, 16)).view(1, 16, 16))

    def forward(self, x):
        B, T, C = x.size()
        return x * self.mask[:, :T, :C]
""" + _TAIL.format(shape="2, 9, 9"), "sliced_buffer")
    assert spec.specialized_shapes == []  # correct for any T <= 16


def test_a_branch_on_tensor_values_is_refused_with_both_reasons() -> None:
    with pytest.raises(InvalidSpecError, match="forward cannot be traced: .*with shapes specialised"):
        capture(VALUE_BRANCH + _TAIL.format(shape="4, 4"), "value_branch")
