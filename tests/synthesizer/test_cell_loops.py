"""Hand-written loops over time steps (``frontend/cell_loops.py``, ``emit/forward_loops.py``).

A forward that calls ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell`` on ``x[:, t]`` (or
``x[t]``, or the items of ``x.unbind(dim)``) and threads the state from step to step is
one loop node of the captured graph, lowered by the recurrent family to one input
projection and one step kernel launched per step from its launcher; a loop of hand-written
gate math over ``x[:, t]`` that is not exactly a cell keeps its kernels per step, shared
by every step, and its forward is a Python loop. Either way the candidate's kernels and source do not grow with
the sequence length. Odd sizes: batch 3, hidden 20, T = 1, 5 and 9."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit.kernel_sharing import count_kernels
from ke_synthesizer.offline.frontend.recurrent import CellLoop, fake_output
from kernelevolve.ports.synthesis import Proposal, ProposalRequest
from kernelevolve.spec_shrink import rewrite, size_constants

from .conftest import EXAMPLES_DIR

_HEADER = """
import torch
import torch.nn as nn

B, T, IN_F, H = 3, {steps}, 7, 20
"""

# the examples' own cell loops (batch 3, hidden 20; SEQ_LEN set per case): an LSTM cell
# over x[:, t] (zero state made in the forward, every h stacked, a head on the last) and a
# GRU cell over x.unbind(0) (the initial state an input, the last state returned)
_EXAMPLES = {"lstm_batch_first": "model_lstm_cell_loop", "gru_unbind_state": "model_gru_cell_time_major"}

# name -> (forward's class body, get_inputs body); every one computes the same as its
# reference at any T
_MODELS: dict[str, tuple[str, str]] = {
    # no initial state (the cell's zeros), x[t], relu, only the last state read
    "rnn_relu_last": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.RNNCell(IN_F, H, nonlinearity="relu")

    def forward(self, x):
        h = None
        for t in range(x.shape[0]):
            h = self.cell(x[t], h)
        return h
""", "[torch.randn(T, B, IN_F)]"),
    # no bias; every middle step's h read by a running sum (the loop output's step t)
    "rnn_tanh_running_sum": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.RNNCell(IN_F, H, bias=False)

    def forward(self, x):
        h = torch.zeros(x.size(0), H)
        total = torch.zeros(x.size(0), H)
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
            total = total + h * 0.5
        return total, h
""", "[torch.randn(B, T, IN_F)]"),
    # time major, (h, c) given as inputs, the last cell state returned
    "lstm_time_major_cell_state": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(IN_F, H)

    def forward(self, x, h, c):
        outs = []
        for t in range(x.size(0)):
            h, c = self.cell(x[t], (h, c))
            outs.append(h)
        return torch.stack(outs, 0), c
""", "[torch.randn(T, B, IN_F), torch.randn(B, H), torch.randn(B, H)]"),
    # an unbatched sequence (cells on 1-D inputs)
    "gru_unbatched": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(IN_F, H)

    def forward(self, x):
        h = x.new_zeros(H)
        outs = []
        for t in range(x.size(0)):
            h = self.cell(x[t], h)
            outs.append(h)
        return torch.stack(outs)
""", "[torch.randn(T, IN_F)]"),
    # two cells stacked in one loop: the second reads the first one's step t
    "lstm_two_layers": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell1 = nn.LSTMCell(IN_F, H)
        self.cell2 = nn.LSTMCell(H, H)

    def forward(self, x):
        h1 = c1 = h2 = c2 = x.new_zeros(x.size(0), H)
        outs = []
        for t in range(x.size(1)):
            h1, c1 = self.cell1(x[:, t], (h1, c1))
            h2, c2 = self.cell2(h1, (h2, c2))
            outs.append(h2)
        return torch.stack(outs, dim=1)
""", "[torch.randn(B, T, IN_F)]"),
}

STEPS = (1, 5, 9)
NAMES = [*_EXAMPLES, *_MODELS]


def _spec(name: str, steps: int) -> str:
    if name in _EXAMPLES:
        source = (EXAMPLES_DIR / f"{_EXAMPLES[name]}.py").read_text()
        return rewrite(source, size_constants(source), {"SEQ_LEN": steps})
    body, inputs = _MODELS[name]
    return (_HEADER.format(steps=steps) + body + f"\n\ndef get_inputs():\n    return {inputs}\n\n\n"
            "def get_init_inputs():\n    return []\n")


def _hand_written(steps: int) -> str:
    """The hand-written gate math example at another sequence length, with a forget-gate
    bias of 1: not exactly an LSTM cell (which ``manual_cells`` makes one loop node), so
    its gate math stays per step."""
    source = (EXAMPLES_DIR / "model_lstm_unrolled.py").read_text()
    source = source.replace("torch.sigmoid(f) * c", "torch.sigmoid(f + 1.0) * c")
    assert "f + 1.0" in source
    return source.replace("torch.randn(4, 6, IN_F)", f"torch.randn(3, {steps}, IN_F)")


def _seed(source: str, name: str) -> Proposal:
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1))
    return prop


def _forward(source: str) -> str:
    return source[source.index("    def forward("):]


@pytest.fixture(scope="module")
def lowered() -> dict[str, tuple[Proposal, dict[str, Any]]]:
    """Every case's seed at every T, checked against its reference in one interpreter
    subprocess."""
    out: dict[str, tuple[str, Proposal]] = {}
    for steps in STEPS:
        for name in NAMES:
            src = _spec(name, steps)
            out[f"{name}_t{steps}"] = (src, _seed(src, name))
        src = _hand_written(steps)
        out[f"hand_written_t{steps}"] = (src, _seed(src, "hand_written"))
    results = run_in_subprocess([{"id": k, "spec_source": s, "candidate_source": p.source, "seeds": [1, 2]}
                                 for k, (s, p) in out.items()])
    by_id = {r["id"]: r for r in results}
    return {k: (p, by_id[k]) for k, (_s, p) in out.items()}


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("name", NAMES)
def test_a_cell_looped_over_time_is_one_recurrent_launch_and_correct(
        name: str, steps: int, lowered: dict[str, tuple[Proposal, dict[str, Any]]]) -> None:
    prop, result = lowered[f"{name}_t{steps}"]
    assert result["ok"], result
    cells = 2 if name == "lstm_two_layers" else 1
    forward = _forward(prop.source)
    assert forward.count("= launch_rnn_") == cells, forward  # one launch per cell, whatever T
    assert not any("cell" in n for n in prop.fallback_nodes), prop.fallback_nodes  # no cell left to torch
    assert "for _step" not in forward  # nothing left to roll in the forward


@pytest.mark.parametrize("steps", STEPS)
def test_hand_written_gate_math_over_time_is_a_loop_and_correct(
        steps: int, lowered: dict[str, tuple[Proposal, dict[str, Any]]]) -> None:
    prop, result = lowered[f"hand_written_t{steps}"]
    assert result["ok"], result
    forward = _forward(prop.source)
    # the last step launches a kernel of its own (its c is never read: not stored), so
    # the loop needs at least three steps before it
    if steps - 1 >= 3:
        assert f"for _step in range({steps - 1}):" in forward, forward
        assert "x[(slice(None, None, None), _step)]" in forward


def _shape_free(source: str) -> str:
    """The source with the docstring's example shapes and loop bounds blanked (they name T)."""
    return re.sub(r"\d+", "N", source)


# the running sum is T additions the forward writes out, fused into one pointwise kernel
# of T operands: its size is the model's own, not the cell's
_T_FREE = [n for n in NAMES if n != "rnn_tanh_running_sum"] + ["hand_written"]


@pytest.mark.parametrize("name", _T_FREE)
def test_kernels_and_source_do_not_depend_on_the_sequence_length(name: str) -> None:
    synth = OfflineSynthesizer()
    sources, nodes = [], []
    for steps in (5, 64):
        src = _hand_written(steps) if name == "hand_written" else _spec(name, steps)
        nodes.append(len(synth.captured(src, name).gm.graph.nodes))
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        sources.append(prop.source)
    if name == "hand_written":
        # its torch.stack of the T step outputs is an index-family kernel while the stack's
        # inputs fit one launch (T = 5) and a library call past that (T = 64): the cells'
        # kernels must not depend on T, the stack may
        sources = [_without_index_kernels(s) for s in sources]
    assert count_kernels(sources[0]) == count_kernels(sources[1])
    assert _shape_free(sources[0]) == _shape_free(sources[1])
    if name != "hand_written":  # the cells' graph too: one loop node whatever T
        assert nodes[0] == nodes[1], nodes


def _without_index_kernels(source: str) -> str:
    """The kinds of ``@triton.jit`` kernels of ``source`` other than the index family's
    (data movement), their node numbers dropped: the cells' kernels."""
    names = re.findall(r"@triton\.jit\ndef (\w+)\(", source)
    kinds = sorted(re.sub(r"_\d+$", "", n) for n in names if not n.startswith("index_"))
    return "\n".join(f"@triton.jit\ndef {k}(" for k in kinds)


_NOT_A_LOOP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(7, 20)

    def forward(self, x):
        h = c = x.new_zeros(3, 20)
        cs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            cs.append(c)
        return torch.stack(cs, 1)


def get_inputs():
    return [torch.randn(3, 4, 7)]


def get_init_inputs():
    return []
"""


def test_a_middle_cell_state_read_elsewhere_is_not_rolled() -> None:
    """The loop node gives the last cell state only: a forward that reads every step's
    ``c`` keeps its calls as they are, and its candidate still computes the reference."""
    synth = OfflineSynthesizer()
    assert "cell_loops" not in synth.captured(_NOT_A_LOOP, "cs").rewrites
    (prop,) = synth.propose(ProposalRequest(spec_source=_NOT_A_LOOP, spec_name="cs", count=1))
    (result,) = run_in_subprocess([{"id": "cs", "spec_source": _NOT_A_LOOP, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], result


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell, nn.RNNCell])
@pytest.mark.parametrize("shape", [(3, 5, 7), (5, 3, 7), (5, 7)], ids=["batch_first", "time_major", "unbatched"])
def test_the_fake_shape_rule_matches_the_loop(cls: type[nn.Module], shape: tuple[int, ...]) -> None:
    """A spec captured at real size propagates shapes on fake tensors: the loop node's
    outputs come from sizes (``CellLoop.fake_output``), the same as running it."""
    time_dim = 1 if shape == (3, 5, 7) else 0
    loop = CellLoop(cls(7, 20), "cell", time_dim)  # type: ignore[call-arg]
    x = torch.randn(*shape)
    real = loop(x)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = fake_output(loop, (mode.from_tensor(x),))
    assert fake is not None
    assert [tuple(t.shape) for t in pytree.tree_leaves(fake)] == [tuple(t.shape) for t in pytree.tree_leaves(real)]
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        assert fake_output(loop, (mode.from_tensor(torch.randn(*shape[:-1], 6)),)) is None  # wrong features


_STACKED_CONSTANT = """
import torch
import torch.nn as nn

STEPS = 6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell1 = nn.GRUCell(7, 20)
        self.cell2 = nn.GRUCell(20, 20)

    def forward(self, x):
        h1 = h2 = x.new_zeros(x.size(0), 20)
        outs = []
        for t in range(STEPS):
            h1 = self.cell1(x[:, t], h1)
            h2 = self.cell2(h1, h2)
            outs.append(h2)
        return torch.stack(outs, dim=1)


def get_inputs():
    return [torch.randn(3, STEPS, 7)]


def get_init_inputs():
    return []
"""


def test_stacked_cells_over_a_constant_number_of_steps_stay_a_symbolic_graph() -> None:
    """A loop over a constant count traces symbolically (no shape question): its chains,
    the second cell's over the first one's steps included, keep the graph from the
    dispatcher-level trace, and both become loop nodes (the slice of the first T steps
    keeps the graph general)."""
    synth = OfflineSynthesizer()
    spec = synth.captured(_STACKED_CONSTANT, "stacked")
    assert spec.tracer == "symbolic" and spec.rewrites.get("cell_loops") == 2, (spec.tracer, spec.rewrites)
    (prop,) = synth.propose(ProposalRequest(spec_source=_STACKED_CONSTANT, spec_name="stacked", count=1))
    assert _forward(prop.source).count("= launch_rnn_gru_") == 2
    (result,) = run_in_subprocess([{"id": "stacked", "spec_source": _STACKED_CONSTANT,
                                    "candidate_source": prop.source, "seeds": [1, 2]}])
    assert result["ok"], result
