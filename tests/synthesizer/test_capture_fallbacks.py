"""Capture takes any forward whose reference runs: plain symbolic tracing, then buffers as
graph values (``self.mask[:, :, :T, :T]``), then shapes fixed to the example inputs, then
the dispatcher-level trace (make_fx on fake tensors); a branch on tensor values gets the
library-call candidate (the reference forward, saying why); only a spec whose reference
raises is refused."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.frontend.capture import capture
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


PARAMETER_IN_A_LOOP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.decay = nn.Parameter(torch.linspace(0.1, 0.9, 7))

    def forward(self, x):
        a = torch.exp(-self.decay)  # a parameter read directly in the forward
        state = torch.zeros_like(x[:, 0])
        outs = []
        for i in range(0, x.size(1), 2):  # a loop over a size: shapes specialised
            state = state * a + x[:, i]
            outs.append(state)
        return torch.stack(outs, dim=1)
"""


@pytest.mark.parametrize("shape", ["3, 6, 7", "2, 9, 7"])
def test_a_parameter_read_while_shapes_are_fixed_is_read_once_and_never_frozen(shape: str) -> None:
    """The shape tracer's real value of a parameter is the parameter, not fx's proxy for it:
    a proxy there re-entered tracing at every op that read it (spurious get_attr nodes and
    values frozen as ``_tensor_constant`` s; 29,596 nodes instead of 344 for a chunked scan)."""
    spec = capture(PARAMETER_IN_A_LOOP + _TAIL.format(shape=shape), "param_loop")
    assert spec.tracer == "shapes"
    targets = [str(n.target) for n in spec.gm.graph.nodes if n.op == "get_attr"]
    assert targets == ["decay"], targets


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


def test_a_branch_on_tensor_values_gets_the_library_call_candidate_with_its_reasons() -> None:
    spec = VALUE_BRANCH + _TAIL.format(shape="4, 4")
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name="value_branch", count=1))
    assert prop.fallback_nodes == ("forward",)
    assert "Library-call candidate" in prop.source and "with shapes specialised" in prop.source
    assert "dispatcher-level trace" in prop.description
    ns: dict[str, object] = {}
    exec(compile(prop.source, "<candidate>", "exec"), ns)  # noqa: S102 - our own generated module
    import torch
    model = ns["ModelNew"]()  # type: ignore[operator]
    x = torch.randn(4, 4)
    torch.testing.assert_close(model(x), x * 2 if x.sum() > 0 else x)
    assert OfflineSynthesizer().space(spec, "value_branch") == []  # nothing to transform


def test_the_library_call_candidate_is_judged_honestly(judge: Judge) -> None:
    """It is the reference itself, so the evaluator must not count it as a kernel: no
    launches of its own."""
    spec = VALUE_BRANCH + _TAIL.format(shape="4, 4")
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name="value_branch", count=1))
    verdict = judge.evaluate(spec, prop.source, "library")
    assert verdict.status == "rejected" and "no Triton kernel" in verdict.reason, verdict


ITEM_AND_PROXY_INT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 12)

    def forward(self, x):
        n = int(x.shape[0])  # a Proxy cannot be an int: shapes are specialised
        scale = float(x.abs().max().item())  # .item(): data-dependent, only the library candidate runs it
        return self.proj(x[:n]) / scale
"""

CONTROL_FLOW_SPECS = {
    "loop_over_size": LOOP_OVER_SIZE + _TAIL.format(shape="3, 5, 7"),
    "item_and_proxy_int": ITEM_AND_PROXY_INT + _TAIL.format(shape="5, 12"),
    "rnn_module": """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(6, 7, batch_first=True)

    def forward(self, x):
        y, h = self.rnn(x)
        if y.shape[1] > 2:  # a branch on a size next to a recurrent layer
            y = y[:, -2:]
        return y.sum(dim=1) + h[0]
""" + _TAIL.format(shape="2, 4, 6"),
}


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW_SPECS))
def test_specs_with_control_flow_get_a_correct_candidate(name: str) -> None:
    from ke_synthesizer.offline.check import run_in_subprocess

    src = CONTROL_FLOW_SPECS[name]
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    (res,) = run_in_subprocess([{"id": name, "spec_source": src, "candidate_source": prop.source, "seeds": [1]}])
    assert res["ok"], res


REFERENCE_RAISES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x @ torch.ones(3, 3)  # the inputs are [4, 5]: the reference itself raises
"""


def test_a_spec_whose_reference_raises_is_refused_clearly() -> None:
    with pytest.raises(InvalidSpecError, match="reference forward raised: RuntimeError"):
        capture(REFERENCE_RAISES + _TAIL.format(shape="4, 5"), "reference_raises")


def test_a_shape_specialised_candidate_facing_other_shapes_is_judged_not_crashed(judge: Judge) -> None:
    """The evaluator's extra shape sets judge a specialised candidate; the synthesizer
    itself only ever sees the example shapes."""
    spec = LOOP_OVER_SIZE + _TAIL.format(shape="3, 5, 7") + """

def get_extra_inputs():
    return [[torch.randn(2, 4, 7)]]
"""
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name="loop_extra", count=1))
    verdict = judge.evaluate(spec, prop.source, "loop_extra")
    # unrolled for 5 steps: on 4 it reads past the input, and the judge says so
    assert verdict.status in ("runtime_error", "incorrect") and "extra shape set" in verdict.reason, verdict
