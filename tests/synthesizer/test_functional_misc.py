"""Functional normalisations with weights as inputs (frontend/norm_functional.py:
``F.group_norm``, ``torch.native_group_norm`` / ``native_layer_norm`` and their ``(out,
mean, rstd)`` items, ``F.local_response_norm`` over 3-D to 5-D inputs) and odds and ends
(frontend/functional_misc.py: softmin, glu, prelu, dist, pairwise_distance, renorm,
gaussian NLL and multilabel soft margin losses, bilinear, trace, linear cross-entropy,
Poisson NLL with Stirling's term), on odd shapes and their options: each
lowered to Triton kernels only (no library call) and correct in the interpreter."""

from __future__ import annotations

from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer

from .test_index_family import R, _spec, lower_and_check

# name -> (forward body over x, y, z, w, inputs)
CASES: dict[str, tuple[str, list[str]]] = {
    "group_norm_weights": ("F.group_norm(x, 3, y, z, eps=1e-3), F.group_norm(x * 2.0, 1)",
                           [f"{R}(3, 6, 5, 7)", f"{R}(6)", f"{R}(6)"]),
    "group_norm_single_position": ("torch.relu(F.group_norm(x, 2, weight=y))", [f"{R}(1, 4, 1)", f"{R}(4)"]),
    "native_group_norm": ("torch.native_group_norm(x, y, z, 2, 6, 11, 3, 1e-5)",
                          [f"{R}(2, 6, 11)", f"{R}(6)", f"{R}(6)"]),
    "native_group_norm_items": ("torch.native_group_norm(x, y, z, 5, 4, 33, 4, 0.1)[2] + 1.0",
                                [f"{R}(5, 4, 3, 11)", f"{R}(4)", f"{R}(4)"]),
    "native_layer_norm": ("torch.native_layer_norm(x, (5, 7), None, y, 1e-5)", [f"{R}(3, 5, 7)", f"{R}(5, 7)"]),
    "native_layer_norm_items": ("torch.native_layer_norm(x, [33], y, None, 0.5)[1] * 3.0", [f"{R}(7, 33)", f"{R}(33)"]),
    "local_response_norm": ("F.local_response_norm(x, 3), F.local_response_norm(y, 2, alpha=0.1, beta=0.5, k=2.0), "
                            "F.local_response_norm(z, 4, alpha=1e-2)",
                            [f"{R}(2, 7, 9)", f"{R}(2, 5, 4, 3)", f"{R}(1, 4, 3, 2, 5)"]),
    "softmin": ("F.softmin(x, 1), F.softmin(x, dim=-1)", [f"{R}(3, 33, 7)"]),
    "glu": ("F.glu(x, 1), F.glu(y)", [f"{R}(5, 34)", f"{R}(3, 4, 10)"]),
    "prelu": ("F.prelu(x, y), F.prelu(z, w)", [f"{R}(2, 3, 5, 7)", f"{R}(3)", f"{R}(7, 9)", f"{R}(1)"]),
    "dist": ("torch.dist(x, y), torch.dist(x, y, 3), torch.dist(x, y, p=1)", [f"{R}(5, 7)", f"{R}(7)"]),
    "pairwise_distance": ("F.pairwise_distance(x, y, p=1.0, keepdim=True), F.pairwise_distance(x, y)",
                          [f"{R}(33, 17)", f"{R}(33, 17)"]),
    "renorm": ("torch.renorm(x, 2, 0, 1.0), torch.renorm(y, 1, 2, 3.0)", [f"{R}(4, 33)", f"{R}(3, 5, 7)"]),
    "gaussian_nll": ("F.gaussian_nll_loss(x, y, z, full=True), F.gaussian_nll_loss(x, y, w, eps=0.5, reduction='sum')",
                     [f"{R}(9, 5)", f"{R}(9, 5)", "torch.rand(9) + 0.1", "torch.rand(9, 5)"]),
    "multilabel_soft_margin": ("F.multilabel_soft_margin_loss(x, y, z), "
                               "F.multilabel_soft_margin_loss(x, y, reduction='none')",
                               [f"{R}(7, 13)", "torch.randint(0, 2, (7, 13)).float()", "torch.rand(13)"]),
    "bilinear": ("F.bilinear(x, y, z, w), torch.bilinear(x[:6].reshape(2, 3, 3), y[:6].reshape(2, 3, 4), z, None)",
                 [f"{R}(7, 3)", f"{R}(7, 4)", f"{R}(5, 3, 4)", f"{R}(5)"]),
    "trace": ("torch.trace(x), torch.trace(y) * 2.0", [f"{R}(5, 7)", f"{R}(33, 3)"]),
    "linear_cross_entropy": ("F.linear_cross_entropy(x, y, z, linear_bias=w, label_smoothing=0.1)",
                             [f"{R}(9, 6)", f"{R}(5, 6)", "torch.randint(0, 5, (9,))", f"{R}(5)"]),
    "poisson_nll_full": ("F.poisson_nll_loss(x, y, full=True), "
                         "F.poisson_nll_loss(x.exp(), y, log_input=False, full=True, reduction='sum')",
                         [f"{R}(7, 5)", "torch.rand(7, 5) * 4.0"]),
}
SPECS = {name: _spec(body, inputs) for name, (body, inputs) in CASES.items()}


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    return lower_and_check(synth, SPECS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_op_is_lowered_to_triton_only_and_correct(name: str, lowered: dict[str, dict[str, Any]]) -> None:
    result = lowered[name]
    assert result["proposal"].fallback_nodes == ()
    assert "@triton.jit" in result["proposal"].source
    assert result["ok"], result["error"][-400:]


@pytest.mark.parametrize("name", ["native_group_norm", "local_response_norm", "renorm", "gaussian_nll"])
def test_functional_op_is_judged_correct(name: str, lowered: dict[str, dict[str, Any]], judge: Judge) -> None:
    verdict = judge.evaluate(SPECS[name], lowered[name]["proposal"].source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
