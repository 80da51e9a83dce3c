"""Recurrent layers (nn.LSTM / nn.GRU / nn.RNN) are captured at the dispatcher level and
lowered to Triton: one input-projection matmul per layer for all time steps, then per
step the hidden-projection matmul and the gate's pointwise ops in fused kernels. Odd
sizes (prime hidden sizes, T = 1), both layouts, one and two layers, one and two
directions."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import Proposal, ProposalRequest

_SPEC = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}({in_f}, {hidden}, num_layers={layers}, batch_first={bf}{extra})

    def forward(self, x):
        out, state = self.rnn(x)
        return out, state{state_pick}


def get_inputs():
    return [torch.randn({shape})]


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
]


def _spec(cls: str, bf: bool, layers: int, hidden: int, steps: int, extra: str) -> str:
    batch, in_f = 3, 6
    shape = f"{batch}, {steps}, {in_f}" if bf else f"{steps}, {batch}, {in_f}"
    return _SPEC.format(cls=cls, in_f=in_f, hidden=hidden, layers=layers, bf=bf, extra=extra, shape=shape,
                        state_pick="[1]" if cls == "LSTM" else "")


def _name(case: tuple[Any, ...]) -> str:
    return "{}_bf{}_l{}_h{}_t{}".format(*case[:5]) + ("_bidir" if "bidirectional" in case[5] else "")


@pytest.fixture(scope="module")
def lowered() -> dict[str, tuple[str, Proposal, dict[str, Any]]]:
    """Every case's seed, checked against the reference in one interpreter subprocess."""
    synth = OfflineSynthesizer()
    out: dict[str, tuple[str, Proposal]] = {}
    for case in CASES:
        src = _spec(*case)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=_name(case), count=1))
        out[_name(case)] = (src, prop)
    results = run_in_subprocess([{"id": k, "spec_source": s, "candidate_source": p.source, "seeds": [1, 2]}
                                 for k, (s, p) in out.items()])
    by_id = {r["id"]: r for r in results}
    return {k: (s, p, by_id[k]) for k, (s, p) in out.items()}


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_recurrent_layer_is_lowered_to_triton_and_correct(case: tuple[Any, ...],
                                                         lowered: dict[str, tuple[str, Proposal, dict[str, Any]]]
                                                         ) -> None:
    _src, prop, result = lowered[_name(case)]
    assert result["ok"], result
    assert "Captured at the dispatcher level" in prop.source
    # the projections are Triton matmuls and every gate op a Triton kernel: only the
    # initial zero states and the stacking of the per-step outputs stay library calls
    left = {name.rstrip("_0123456789") for name in prop.fallback_nodes}
    assert left <= {"zeros", "stack", "cat"}, prop.fallback_nodes
    # per layer: the input projection for all time steps is one matmul, then one hidden
    # projection per step (its bias and the step's input projection fused as the
    # epilogue) and the gate's pointwise ops, fused
    forward = prop.source[prop.source.index("    def forward("):]
    steps, layers = case[4], case[2] * (2 if "bidirectional" in case[5] else 1)
    assert _launches(forward, "= launch_matmul_") == layers * (steps + 1), forward
    # gate activations: a pointwise kernel (LSTM, GRU) or the matmul's epilogue (RNN)
    gates = sum(_launches(ln, "= launch_") for ln in _executed(forward)
                if "sigmoid" in ln or "tanh" in ln or "relu" in ln)
    assert gates >= layers * steps
    if steps >= 4:  # the time steps are a loop over the same launchers, not unrolled copies
        assert re.search(r"^        for _step\w* in range\(\d+\):$", forward, re.MULTILINE), forward


def _executed(forward: str) -> list[str]:
    """The forward's lines, each repeated as often as it runs (``for _step in range(n):``
    loops of rolled time steps)."""
    out: list[str] = []
    times = 1
    for line in forward.splitlines():
        loop = re.match(r"^        for _step\w* in range\((\d+)\):$", line)
        if loop:
            times = int(loop.group(1))
            continue
        if not line.startswith("            "):
            times = 1
        out += [line] * times
    return out


def _launches(forward: str, marker: str) -> int:
    return sum(marker in line for line in _executed(forward))


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
        assert "= launch_matmul_" in prop.source
        jobs.append({"id": cls, "spec_source": src, "candidate_source": prop.source, "seeds": [1],
                     "atol": 1e-2, "rtol": 1e-2})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results
