"""Recurrent layers (nn.LSTM / nn.GRU / nn.RNN) stay one node of the symbolic graph and are
lowered by the recurrent family to a loop over time: per layer one input-projection matmul
per direction for all time steps, then either per step one launch of the same step kernel
(hidden projection, biases and gates fused, both directions in one launch; ``persistent`` =
``off``) or one launch per layer looping over time inside the kernel with the layer held in
registers (``resident``), which the seed takes at these sizes (the padded gates x hidden^2
under the family's resident bound). Both, on odd sizes (prime hidden sizes, T = 1), both
layouts, one to three layers, one and two directions, given initial states, unbatched
inputs; the capture, the kernel count and the candidate's source do not depend on the
sequence length."""

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
from ke_synthesizer.offline.frontend.recurrent import fake_output
from kernelevolve.ports.synthesis import ProposalRequest

_SPEC = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}({in_f}, {hidden}, num_layers={layers}, batch_first={bf}{extra})

    def forward(self, x{h_param}):
        out, state = self.rnn(x{h_arg})
        return out, state{state_pick}


def get_inputs():
    return [torch.randn({shape}){h_inputs}]


def get_init_inputs():
    return []
"""

# (class, batch_first, layers, hidden, steps, extra constructor arguments)
CASES = [
    ("LSTM", True, 2, 13, 5, ""),
    ("LSTM", False, 1, 7, 1, ""),
    ("GRU", True, 1, 11, 3, ""),
    ("GRU", False, 2, 5, 2, ", bias=False"),
    ("RNN", True, 1, 17, 4, ""),
    ("RNN", False, 2, 3, 1, ", nonlinearity='relu'"),
    ("LSTM", True, 2, 7, 4, ", bidirectional=True"),
    ("LSTM", False, 3, 19, 6, ", bidirectional=True"),
    ("GRU", True, 2, 9, 5, ", bidirectional=True"),
    ("GRU", False, 3, 33, 7, ", bidirectional=True"),
    ("RNN", False, 2, 6, 3, ", bidirectional=True, nonlinearity='relu'"),
    # initial states given as inputs (a tuple for the LSTM); an unbatched (2-D) sequence
    ("LSTM", False, 2, 10, 4, ", bidirectional=True|state"),
    ("GRU", True, 2, 12, 3, "|state"),
    ("GRU", False, 2, 8, 5, ", bidirectional=True|unbatched"),
]


def _spec(cls: str, bf: bool, layers: int, hidden: int, steps: int, extra: str, batch: int = 3, in_f: int = 6) -> str:
    extra, _, variant = extra.partition("|")
    dirs = 2 if "bidirectional" in extra else 1
    shape = f"{steps}, {in_f}" if variant == "unbatched" else f"{batch}, {steps}, {in_f}" if bf else \
        f"{steps}, {batch}, {in_f}"
    h_param = h_arg = h_inputs = ""
    if variant == "state":
        h_param = ", h0, c0" if cls == "LSTM" else ", h0"
        h_arg = ", (h0, c0)" if cls == "LSTM" else ", h0"
        state = f"torch.randn({layers * dirs}, {batch}, {hidden})"
        h_inputs = f", {state}, {state}" if cls == "LSTM" else f", {state}"
    return _SPEC.format(cls=cls, in_f=in_f, hidden=hidden, layers=layers, bf=bf, extra=extra, shape=shape,
                        state_pick="[1]" if cls == "LSTM" else "", h_param=h_param, h_arg=h_arg, h_inputs=h_inputs)


def _name(case: tuple[Any, ...]) -> str:
    return "{}_bf{}_l{}_h{}_t{}".format(*case[:5]) + ("_bidir" if "bidirectional" in case[5] else "") + \
        ("_" + case[5].partition("|")[2] if "|" in case[5] else "")


# the per-step loop (the seed takes it only past the family's resident bound)
OFF = {"g0.persistent": "off"}


@pytest.fixture(scope="module")
def lowered() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every case's seed and its per-step loop (ids ``<case>/seed``, ``<case>/off``): the
    sources, checked against the reference in one interpreter subprocess."""
    synth = OfflineSynthesizer()
    out: dict[str, str] = {}
    specs: dict[str, str] = {}
    for case in CASES:
        src = specs[_name(case)] = _spec(*case)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=_name(case), count=1))
        # nothing left to the library; the seed's own choice, resident at these sizes
        assert not prop.fallback_nodes and prop.genome["g0.persistent"] == "auto", prop.genome
        off, full, fallback = synth.lower(synth.captured(src, _name(case)), OFF)
        assert not fallback and full["g0.persistent"] == "off", (fallback, full)
        out[f"{_name(case)}/seed"], out[f"{_name(case)}/off"] = prop.source, off
    results = run_in_subprocess([{"id": k, "spec_source": specs[k.partition("/")[0]], "candidate_source": c,
                                  "seeds": [1, 2]} for k, c in out.items()])
    by_id = {r["id"]: r for r in results}
    return {k: (c, by_id[k]) for k, c in out.items()}


def _kernels(source: str) -> list[str]:
    return [k.rsplit("_", 1)[-1] for k in re.findall(r"^def (rnn_\w+)\(", source, re.MULTILINE)]


def _launcher(source: str) -> str:
    return source[source.index("def launch_rnn_"):source.index("class Model")]


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_the_seed_of_a_small_layer_runs_resident_and_correct(case: tuple[Any, ...],
                                                               lowered: dict[str, tuple[str, dict[str, Any]]]) -> None:
    source, result = lowered[f"{_name(case)}/seed"]
    assert result["ok"], result
    # two kernels: the input projection and the resident one; the forward launches the layer once
    assert _kernels(source) == ["proj", "res"], source
    forward = source[source.index("    def forward("):]
    assert forward.count("= launch_rnn_") == 1, forward
    assert "for step in range(T)" not in _launcher(source)


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_the_per_step_loop_is_lowered_to_triton_and_correct(case: tuple[Any, ...],
                                                            lowered: dict[str, tuple[str, dict[str, Any]]]) -> None:
    source, result = lowered[f"{_name(case)}/off"]
    assert result["ok"], result
    # two kernels: the input projection and the step; the forward launches the layer once
    assert _kernels(source) == ["proj", "step"], source
    forward = source[source.index("    def forward("):]
    assert forward.count("= launch_rnn_") == 1, forward
    assert _launches_per_step(_launcher(source)) == 1, source


def _launches_per_step(launcher: str) -> int:
    """Kernel launches in the body of the launcher's loop over time steps."""
    lines = launcher.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "for step in range(T):")
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for ln in lines[start + 1:]:
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        body.append(ln)
    return sum("[grid" in ln for ln in body)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_capture_kernels_and_source_do_not_depend_on_sequence_length(cls: str) -> None:
    """The layer is one graph node at any T: the same graph, the same kernels and the same
    candidate source at T = 5 and T = 400 (nothing unrolled anywhere)."""
    synth = OfflineSynthesizer()
    sources, nodes = [], []
    for steps in (5, 400):
        src = _spec(cls, True, 2, 7, steps, ", bidirectional=True")
        nodes.append(len(synth.captured(src, "seq").gm.graph.nodes))
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="seq", count=1))
        sources.append(prop.source)
    assert nodes[0] == nodes[1] <= 8, nodes
    assert sources[0] == sources[1]
    assert count_kernels(sources[0]) == 3  # input projection, the resident kernel (the seed here) and _tanh


_HALF_SPEC = """
import torch
import torch.nn as nn

KE_TOLERANCE = {{"atol": 1e-2, "rtol": 1e-2}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}(6, {hidden}, batch_first=True).to(torch.float16)

    def forward(self, x):
        return self.rnn(x)[0]


def get_inputs():
    return [torch.randn(3, 4, 6, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def test_half_precision_recurrent_layers_within_the_half_tolerance() -> None:
    """fp16 weights and inputs: the gates run in fp32 registers, stored as fp16; judged at
    the spec's fp16 tolerance."""
    synth = OfflineSynthesizer()
    jobs = []
    for cls, hidden in (("LSTM", 11), ("GRU", 5)):
        src = _HALF_SPEC.format(cls=cls, hidden=hidden)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=f"half_{cls}", count=1))
        assert "= launch_rnn_" in prop.source and not prop.fallback_nodes
        jobs.append({"id": cls, "spec_source": src, "candidate_source": prop.source, "seeds": [1],
                     "atol": 1e-2, "rtol": 1e-2})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_the_fake_shape_rule_matches_the_module(cls: type[nn.RNNBase], batch_first: bool,
                                                bidirectional: bool) -> None:
    """At real size the layer's outputs on fake tensors come from its sizes, not from
    stepping through time (recurrent.fake_output): the same shapes and dtypes as running
    it, batched and unbatched, with and without initial states; sizes the module refuses
    give no rule (running it raises torch's error)."""
    mod = cls(5, 7, num_layers=2, batch_first=batch_first, bidirectional=bidirectional)
    dirs = 2 if bidirectional else 1
    for x, state in ((torch.randn(3, 4, 5), (2 * dirs, 3 if batch_first else 4, 7)),
                     (torch.randn(4, 5), (2 * dirs, 7))):
        for given in (False, True):
            hx: Any = None
            if given:
                hx = (torch.randn(state), torch.randn(state)) if cls is nn.LSTM else torch.randn(state)
            args = (x,) if hx is None else (x, hx)
            real = mod(*args)
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                fake = fake_output(mod, tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else
                                              tuple(mode.from_tensor(t) for t in a) for a in args))
            flat_real, flat_fake = pytree.tree_leaves(real), pytree.tree_leaves(fake)
            assert [(t.shape, t.dtype) for t in flat_real] == [(t.shape, t.dtype) for t in flat_fake]
    with FakeTensorMode() as mode:
        assert fake_output(mod, (mode.from_tensor(torch.randn(3, 4, 6)),)) is None  # 6 features, not 5


_KEYWORD_STATE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(6, 5, batch_first=True)

    def forward(self, x, h0):
        return self.rnn(x, hx=h0)[0]


def get_inputs():
    return [torch.randn(3, 4, 6), torch.randn(1, 3, 5)]


def get_init_inputs():
    return []
"""


def test_a_layer_called_with_a_keyword_state_is_still_lowered_and_correct() -> None:
    """A call the recurrent family does not take (a keyword argument) goes to the
    dispatcher-level trace as before: still Triton kernels, still correct."""
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=_KEYWORD_STATE, spec_name="kw", count=1))
    assert "= launch_" in prop.source and "rnn" not in prop.fallback_nodes
    (result,) = run_in_subprocess([{"id": "kw", "spec_source": _KEYWORD_STATE, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], result
