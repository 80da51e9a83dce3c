"""Every spec gets a Triton seed: einsums of any arity and pattern as batched matmuls,
the chain after a convolution (a 0-d constant made in the forward, a library conv) in a
Triton epilogue, a failed fused epilogue split off before anything goes to the library,
and a recurrent cell that keeps its hidden state on the module. Each seed launches
kernels of its own and is correct in the interpreter on odd shapes."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.families.conv import kernel_conv
from kernelevolve.errors import LoweringError
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import example_source, lower_example

# equation -> (input shapes, extra input shapes): odd sizes, size-1 dims, 1-3 operands
EINSUMS = {
    "bijl,lk->bijk": ("(2, 5, 7, 24), (24, 19)", "(1, 3, 1, 9), (9, 33)"),
    "ij,jk,kl->il": ("(7, 13), (13, 5), (5, 33)", "(1, 2), (2, 3), (3, 1)"),
    "bn,anm,bm->ba": ("(3, 11), (6, 11, 9), (3, 9)", "(1, 2), (1, 2, 3), (1, 3)"),
    "ijk,jkl->il": ("(7, 3, 5), (3, 5, 17)", "(2, 1, 4), (1, 4, 3)"),
    "bi,bj->bij": ("(4, 7), (4, 33)", "(1, 1), (1, 3)"),
    "ij,ij->i": ("(37, 19), (37, 19)", "(1, 5), (1, 5)"),
    "i,i->": ("(1000,), (1000,)", "(7,), (7,)"),
    "bhqd,bkhd->bhqk": ("(2, 3, 9, 8), (2, 11, 3, 8)", "(1, 1, 2, 3), (1, 5, 1, 3)"),
    "abcd,dc->ab": ("(3, 4, 5, 6), (6, 5)", "(1, 1, 2, 3), (3, 2)"),
    "ij,jk->ki": ("(9, 13), (13, 7)", "(1, 1), (1, 1)"),
    "bij,bjk,bkl->bli": ("(2, 3, 4), (2, 4, 5), (2, 5, 6)", "(1, 1, 2), (1, 2, 3), (1, 3, 1)"),
    "bik,bjk->bij": ("(2, 33, 7), (2, 1, 7)", "(1, 1, 1), (1, 3, 1)"),
    "ijk->j": ("(3, 4, 5),", "(1, 2, 1),"),
}


def einsum_spec(eq: str, shapes: str, extra: str) -> str:
    n = eq.split("->")[0].count(",") + 1
    args = ", ".join(f"x{i}" for i in range(n))

    def make(s: str) -> str:
        return "[" + ", ".join(f"torch.randn{t}" for t in eval("[" + s + "]")) + "]"  # noqa: S307 - test data

    return (f'"""einsum {eq}."""\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n'
            f"    def __init__(self):\n        super().__init__()\n\n    def forward(self, {args}):\n"
            f'        return torch.einsum("{eq}", {args})\n\n\ndef get_inputs():\n    return {make(shapes)}\n\n\n'
            f"def get_init_inputs():\n    return []\n\n\ndef get_extra_inputs():\n    return [{make(extra)}]\n")


def test_einsums_are_batched_matmuls_and_correct(synth: OfflineSynthesizer) -> None:
    jobs = []
    for eq, (shapes, extra) in EINSUMS.items():
        src = einsum_spec(eq, shapes, extra)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="einsum", count=1))
        assert prop.fallback_nodes == (), (eq, prop.fallback_nodes)
        assert "torch.einsum" not in prop.source and "@triton.jit" in prop.source, eq
        if "->" in eq and eq.split("->")[0].count(",") >= 1 and eq not in ("bi,bj->bij",):
            assert "matmul" in prop.source, eq  # a contraction is a matmul kernel, not a reduction
        jobs.append({"id": eq, "spec_source": src, "candidate_source": prop.source, "seeds": [1, 2]})
    bad = [(r["id"], r.get("error"), r["trials"]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad, bad


def test_einsum_left_to_library_when_it_cannot_be_a_matmul(synth: OfflineSynthesizer) -> None:
    # a repeated index (a diagonal) and size-1 broadcasting of an index: the library's
    for eq, shapes in (("ii->i", "(5, 5)"), ("ij,kj->ik", "(3, 4), (2, 1)")):
        src = einsum_spec(eq, shapes, shapes)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="einsum", count=1))
        assert "einsum" in prop.fallback_nodes, eq


def test_example_einsum_seed_is_one_matmul(synth: OfflineSynthesizer) -> None:
    src, _, fallback = lower_example(synth, "einsum_4d_matrix", {})
    assert fallback == ()
    assert len(re.findall(r"^def matmul_", src, re.M)) == 1


def test_conv_epilogue_with_a_forward_constant(synth: OfflineSynthesizer, judge: Judge) -> None:
    """``torch.min(conv(x), torch.tensor(c)) + bias) * s``: one conv kernel with the chain
    in its epilogue (the constant a literal); with the conv a library call, the chain is a
    Triton kernel of its own; both judged correct."""
    name = "conv2d_min_const_scale"
    src = example_source(name)
    seed, genome, fallback = lower_example(synth, name, {})
    assert fallback == () and genome.get("epilogue.conv", "fused") == "fused"
    assert len(re.findall(r"^def conv", seed, re.M)) == 1
    assert "tl.minimum(v_conv, 0.4000000059604645)" in seed  # the fp32 constant 0.4
    lib, genome, fallback = lower_example(synth, name, {"impl.conv": "library"})
    assert fallback == ("conv",) and genome["impl.conv"] == "library"
    assert len(re.findall(r"^@triton.jit", lib, re.M)) == 1
    for cand in (seed, lib):
        verdict = judge.evaluate(src, cand, name)
        assert verdict.status == "correct", verdict.reason


def test_failed_epilogue_is_split_off_before_the_library(synth: OfflineSynthesizer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused conv epilogue that cannot be emitted: the conv stays a Triton kernel and the
    chain becomes a pointwise kernel (before, the conv and every op after it went to the
    library, and a lone conv with its chain had no Triton kernel left)."""

    real = kernel_conv.epilogue_lines

    def refuse(group: Any, *args: Any) -> list[str]:
        if len(group.members) > 1:  # an epilogue op after the conv
            raise LoweringError("epilogue refused (test)")
        return real(group, *args)

    monkeypatch.setattr(kernel_conv, "epilogue_lines", refuse)
    name = "conv2d_min_const_scale"
    src, genome, fallback = lower_example(OfflineSynthesizer(), name, {})
    assert fallback == () and genome["epilogue.conv"] == "separate"
    assert len(re.findall(r"^@triton.jit", src, re.M)) == 2
    monkeypatch.undo()
    (res,) = run_in_subprocess([{"id": name, "spec_source": example_source(name), "candidate_source": src,
                                 "seeds": [1]}])
    assert res["ok"], res


RNN_STATE = '''"""A vanilla RNN cell that keeps its hidden state on the module across calls."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int, batch: int):
        super().__init__()
        self.hidden = torch.randn(batch, hidden_size)
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.randn(BATCH, 13)]


def get_init_inputs():
    return [13, HIDDEN, 9, BATCH]
'''


@pytest.mark.parametrize("batch,hidden", [(1, 1), (7, 33), (6, 21)])
def test_rnn_cell_with_state_on_the_module(synth: OfflineSynthesizer, batch: int, hidden: int) -> None:
    """Tracing a forward that assigns ``self.hidden`` left a proxy (or a later call's value)
    on the module and a graph past its output; the seed had no Triton kernel. Now the graph
    reads the state as ``__init__`` built it, the linear layers and tanh are matmul kernels,
    the device move stays in the forward (a plain attribute is not moved by ``.to(device)``)."""
    src = RNN_STATE.replace("BATCH", str(batch)).replace("HIDDEN", str(hidden))
    spec = synth.captured(src, "rnn_state")
    assert spec.tracer == "symbolic"
    assert isinstance(spec.model.hidden, torch.Tensor) and not isinstance(spec.model.hidden, torch.fx.Proxy)
    assert list(spec.gm.graph.nodes)[-1].op == "output"  # nothing traced past the output
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="rnn_state", count=1))
    assert set(prop.fallback_nodes) <= {"cat"}
    assert ".to(t_getattr_1)" in prop.source and "launch_matmul_linear_tanh" in prop.source
    (res,) = run_in_subprocess([{"id": "rnn", "spec_source": src, "candidate_source": prop.source,
                                 "seeds": [1, 2]}])
    assert res["ok"], res
