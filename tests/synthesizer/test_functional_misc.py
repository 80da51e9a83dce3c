"""Functional odds and ends (frontend/functional_misc.py): softmin, glu, prelu, dist,
pairwise_distance, renorm, gaussian NLL and multilabel soft margin losses, on odd shapes
and their options, each lowered to Triton kernels only and correct in the interpreter."""

from __future__ import annotations

from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest


def _spec(params: str, body: str, inputs: str) -> str:
    return "\n".join([
        '"""A functional case."""', "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "",
        "", "class Model(nn.Module):", f"    def forward(self, {params}):", f"        return {body}", "", "",
        "def get_inputs():", f"    return [{inputs}]", "", "", "def get_init_inputs():", "    return []", ""])


CASES: dict[str, str] = {
    "softmin": _spec("x", "F.softmin(x, 1), F.softmin(x, dim=-1)", "torch.randn(3, 33, 7)"),
    "glu": _spec("x, y", "F.glu(x, 1), F.glu(y)", "torch.randn(5, 34), torch.randn(3, 4, 10)"),
    "prelu": _spec("x, w, y, v", "F.prelu(x, w), F.prelu(y, v)",
                   "torch.randn(2, 3, 5, 7), torch.randn(3), torch.randn(7, 9), torch.randn(1)"),
    "dist": _spec("x, y", "torch.dist(x, y), torch.dist(x, y, 3), torch.dist(x, y, p=1)",
                  "torch.randn(5, 7), torch.randn(7)"),
    "pairwise_distance": _spec("x, y", "F.pairwise_distance(x, y, p=1.0, keepdim=True), F.pairwise_distance(x, y)",
                               "torch.randn(33, 17), torch.randn(33, 17)"),
    "renorm": _spec("x, y", "torch.renorm(x, 2, 0, 1.0), torch.renorm(y, 1, 2, 3.0)",
                    "torch.randn(4, 33), torch.randn(3, 5, 7)"),
    "gaussian_nll": _spec("x, t, v, w", "F.gaussian_nll_loss(x, t, v, full=True), "
                          "F.gaussian_nll_loss(x, t, w, eps=0.5, reduction='sum')",
                          "torch.randn(9, 5), torch.randn(9, 5), torch.rand(9) + 0.1, torch.rand(9, 5)"),
    "multilabel_soft_margin": _spec("x, t, w", "F.multilabel_soft_margin_loss(x, t, w), "
                                    "F.multilabel_soft_margin_loss(x, t, reduction='none')",
                                    "torch.randn(7, 13), torch.randint(0, 2, (7, 13)).float(), torch.rand(13)"),
}


def _propose(synth: OfflineSynthesizer, name: str) -> Any:
    (prop,) = synth.propose(ProposalRequest(spec_source=CASES[name], spec_name=name, count=1))
    return prop


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_op_is_lowered_to_triton_only(name: str, synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, name)
    assert prop.fallback_nodes == ()
    assert "@triton.jit" in prop.source


def test_functional_ops_are_correct(synth: OfflineSynthesizer) -> None:
    jobs = [{"id": name, "spec_source": src, "candidate_source": _propose(synth, name).source, "seeds": [1, 2]}
            for name, src in CASES.items()]
    bad = [(r["id"], r["error"][-400:]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad


@pytest.mark.parametrize("name", ["renorm", "gaussian_nll"])
def test_functional_op_is_judged_correct(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    verdict = judge.evaluate(CASES[name], _propose(synth, name).source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
