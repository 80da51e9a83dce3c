"""Losses: triplet margin (p-norm, swap, eps), margin ranking, hinge embedding, cosine
embedding, BCE / BCE-with-logits (weight, pos_weight), soft margin, multi-margin, Poisson NLL, smooth
L1 / Huber (beta / delta), KL-div (log_target), in functional and module form with
mean / sum / none reductions, are decomposed into ops the row and pointwise kernels
lower; sibling reductions over the same rows share one kernel (genome key
``sibling.<node>``: fused / separate) and the scalar mean / sum of per-row values is
accumulated in that kernel with atomics (``total.<node>``: atomic / separate)."""

from __future__ import annotations

import re

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import lower_example

FUNCTIONAL = '''"""Functional losses with their options, one output each."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, p, n, s1, s2, sign, prob, logit, w, cls):
        return (
            F.triplet_margin_loss(a, p, n, margin=0.5, p=1, swap=True, reduction="sum"),
            F.triplet_margin_loss(a, p, n, eps=1e-3, reduction="none"),
            F.margin_ranking_loss(s1, s2, sign, margin=0.2),
            F.hinge_embedding_loss(a, torch.sign(p), margin=0.7, reduction="sum"),
            F.cosine_embedding_loss(a, p, sign, margin=0.1, reduction="none"),
            F.binary_cross_entropy(prob, torch.sigmoid(logit), weight=w),
            F.binary_cross_entropy_with_logits(logit, prob, weight=w, reduction="sum"),
            F.soft_margin_loss(logit, torch.sign(a)),
            F.multi_margin_loss(a, cls, margin=0.5, p=2),
            F.smooth_l1_loss(a, p, beta=0.25, reduction="none"),
            F.kl_div(F.log_softmax(a, -1), F.log_softmax(p, -1), reduction="batchmean", log_target=True),
        )


def get_inputs():
    a, p, n = torch.randn(13, 17), torch.randn(13, 17), torch.randn(13, 17)
    sign = torch.randint(0, 2, (13,)).float() * 2 - 1
    return [a, p, n, torch.randn(13), torch.randn(13), sign, torch.rand(13, 17) * 0.98 + 0.01,
            torch.randn(13, 17), torch.rand(13, 17), torch.randint(0, 17, (13,))]


def get_init_inputs():
    return []


def get_extra_inputs():
    sign = torch.tensor([1.0, -1.0, 1.0])
    return [[torch.randn(3, 1), torch.randn(3, 1), torch.randn(3, 1), torch.randn(3), torch.randn(3), sign,
             torch.rand(3, 1) * 0.98 + 0.01, torch.randn(3, 1), torch.rand(3, 1), torch.zeros(3, dtype=torch.long)]]
'''

MODULES = '''"""Loss modules with their settings (weights as buffers)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.triplet = nn.TripletMarginLoss(margin=0.3, p=3, swap=True)
        self.bce = nn.BCEWithLogitsLoss(weight=torch.rand(17), pos_weight=torch.full((17,), 2.0))
        self.cos = nn.CosineEmbeddingLoss(margin=-0.2, reduction="sum")
        self.rank = nn.MarginRankingLoss(margin=0.1, reduction="none")
        self.huber = nn.HuberLoss(delta=0.5)
        self.poisson = nn.PoissonNLLLoss(log_input=False, reduction="sum")

    def forward(self, a, p, n, t, y):
        return (self.triplet(a, p, n) + self.bce(a, t), self.cos(a, p, y), self.rank(a[:, 0], n[:, 0], y),
                self.huber(a, n), self.poisson(t + 0.1, p.abs()), F.poisson_nll_loss(a, t))


def get_inputs():
    return [torch.randn(11, 17), torch.randn(11, 17), torch.randn(11, 17), torch.rand(11, 17),
            torch.randint(0, 2, (11,)).float() * 2 - 1]


def get_init_inputs():
    return []
'''

COSINE = '''"""Cosine similarity: three sums over the same rows."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return F.cosine_similarity(a, b, dim=-1)


def get_inputs():
    return [torch.randn(7, 131), torch.randn(7, 131)]


def get_init_inputs():
    return []
'''


def _propose(synth: OfflineSynthesizer, src: str, name: str):  # type: ignore[no-untyped-def]
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    return prop


def _launches(source: str) -> int:
    """Kernel launches in the candidate's forward (launchers it calls; each launches one
    kernel for the single / looped strategies)."""
    return len(re.findall(r"launch_\w+\(", source.split("class ModelNew")[1]))


@pytest.mark.parametrize(("name", "src"), [("functional", FUNCTIONAL), ("modules", MODULES)])
def test_losses_are_lowered_and_correct(synth: OfflineSynthesizer, name: str, src: str) -> None:
    prop = _propose(synth, src, name)
    assert prop.fallback_nodes == ()  # no loss stays a library call
    (result,) = run_in_subprocess([{"id": name, "spec_source": src, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])


def test_sibling_reductions_share_one_kernel(synth: OfflineSynthesizer) -> None:
    # cosine similarity: dot, |a|^2 and |b|^2 were 3 row kernels; one pass now
    fused, full, _ = lower_example(synth, "cosine", {}, COSINE)
    assert _launches(fused) == 1
    keys = [k for k in full if k.startswith("sibling.")]
    assert len(keys) == 2 and all(full[k] == "fused" for k in keys)
    separate, _, _ = lower_example(synth, "cosine", {k: "separate" for k in keys}, COSINE)
    assert _launches(separate) == 3
    results = run_in_subprocess([{"id": i, "spec_source": COSINE, "candidate_source": s, "seeds": [1]}
                                 for i, s in (("fused", fused), ("separate", separate))])
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-500:]) for r in results]


# per-row terms then their scalar mean: rows longer than a chunk, a row count that is no
# multiple of the row block
TOTAL = COSINE.replace("F.cosine_similarity(a, b, dim=-1)",
                       "(1.0 - F.cosine_similarity(a, b, dim=-1)).mean(), F.triplet_margin_loss(a, b, a * 0.5 - b)")
TOTAL = TOTAL.replace("torch.randn(7, 131), torch.randn(7, 131)", "torch.randn(37, 300), torch.randn(37, 300)")


@pytest.mark.parametrize("variant", [{}, {"strategy": "looped", "BLOCK_N": "64", "BLOCK_M": "2"},
                                     {"programs": "128", "BLOCK_M": "1"}, {"total": "separate"}])
def test_scalar_total_is_fused_with_atomics(synth: OfflineSynthesizer, variant: dict[str, str]) -> None:
    _, full, _ = lower_example(synth, "total", {}, TOTAL)
    totals = [k for k in full if k.startswith("total.")]
    assert len(totals) == 2 and all(full[k] == "atomic" for k in totals)
    genome = {**full, **{k: variant["total"] for k in totals if "total" in variant}}
    for key in full:
        knob = key.partition(".")[2]
        if knob in variant and not key.startswith("total."):
            genome[key] = variant[knob]
    source, _, fallback = lower_example(synth, "total", genome, TOTAL)
    assert fallback == ()
    # each loss: per-row sums and the scalar mean in one kernel (separate: a mean kernel each)
    assert _launches(source) == (4 if "total" in variant else 2)
    assert ("tl.atomic_add(" in source) is ("total" not in variant)
    (result,) = run_in_subprocess([{"id": "total", "spec_source": TOTAL, "candidate_source": source, "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])


def test_cosine_embedding_loss_is_one_kernel(synth: OfflineSynthesizer) -> None:
    src = COSINE.replace("F.cosine_similarity(a, b, dim=-1)",
                         "F.cosine_embedding_loss(a, b, torch.ones(a.shape[0]), margin=0.1)")
    prop = _propose(synth, src, "cos_embedding")
    assert [n for n in prop.fallback_nodes if n != "ones"] == []
    assert _launches(prop.source) == 1  # the three sums, the per-row loss and the mean


def test_loss_candidate_is_judged_correct(synth: OfflineSynthesizer, judge: Judge) -> None:
    prop = _propose(synth, MODULES, "modules")
    verdict = judge.evaluate(MODULES, prop.source, "modules")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["kernel_launches"]
