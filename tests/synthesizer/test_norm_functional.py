"""Normalisations in functional form with weights and statistics as inputs
(frontend/norm_functional.py): ``F.group_norm``, ``torch.native_group_norm`` and
``torch.native_layer_norm`` (their ``(out, mean, rstd)`` tuples), and
``F.local_response_norm`` over 3-D to 5-D inputs, on odd shapes: each lowered to Triton
kernels only (no library call) and correct in the interpreter."""

from __future__ import annotations

from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest


def _spec(params: str, body: str, inputs: str) -> str:
    return "\n".join([
        '"""A functional normalisation case."""', "import torch", "import torch.nn as nn",
        "import torch.nn.functional as F", "", "",
        "class Model(nn.Module):", f"    def forward(self, {params}):", f"        return {body}", "", "",
        "def get_inputs():", f"    return [{inputs}]", "", "", "def get_init_inputs():", "    return []", ""])


CASES: dict[str, str] = {
    "group_norm_weights": _spec("x, w, b", "F.group_norm(x, 3, w, b, eps=1e-3), F.group_norm(x * 2.0, 1)",
                                "torch.randn(3, 6, 5, 7), torch.randn(6), torch.randn(6)"),
    "group_norm_single_position": _spec("x, w", "torch.relu(F.group_norm(x, 2, weight=w))",
                                        "torch.randn(1, 4, 1), torch.randn(4)"),
    "native_group_norm": _spec("x, w, b", "torch.native_group_norm(x, w, b, 2, 6, 11, 3, 1e-5)",
                               "torch.randn(2, 6, 11), torch.randn(6), torch.randn(6)"),
    "native_group_norm_items": _spec("x, w, b", "torch.native_group_norm(x, w, b, 5, 4, 33, 4, 0.1)[2] + 1.0",
                                     "torch.randn(5, 4, 3, 11), torch.randn(4), torch.randn(4)"),
    "native_layer_norm": _spec("x, b", "torch.native_layer_norm(x, (5, 7), None, b, 1e-5)",
                               "torch.randn(3, 5, 7), torch.randn(5, 7)"),
    "native_layer_norm_items": _spec("x, w", "torch.native_layer_norm(x, [33], w, None, 0.5)[1] * 3.0",
                                     "torch.randn(7, 33), torch.randn(33)"),
    "local_response_norm": _spec("x, y, z", "F.local_response_norm(x, 3), "
                                 "F.local_response_norm(y, 2, alpha=0.1, beta=0.5, k=2.0), "
                                 "F.local_response_norm(z, 4, alpha=1e-2)",
                                 "torch.randn(2, 7, 9), torch.randn(2, 5, 4, 3), torch.randn(1, 4, 3, 2, 5)"),
}


def _propose(synth: OfflineSynthesizer, name: str) -> Any:
    (prop,) = synth.propose(ProposalRequest(spec_source=CASES[name], spec_name=name, count=1))
    return prop


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_norm_is_lowered_to_triton_only(name: str, synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, name)
    assert prop.fallback_nodes == ()
    assert "library call" not in prop.source and "@triton.jit" in prop.source


def test_functional_norms_are_correct(synth: OfflineSynthesizer) -> None:
    jobs = [{"id": name, "spec_source": src, "candidate_source": _propose(synth, name).source, "seeds": [1, 2]}
            for name, src in CASES.items()]
    bad = [(r["id"], r["error"][-400:]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad


@pytest.mark.parametrize("name", ["native_group_norm", "local_response_norm"])
def test_functional_norm_is_judged_correct(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    verdict = judge.evaluate(CASES[name], _propose(synth, name).source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
