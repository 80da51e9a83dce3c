"""The convnd family: transposed convolution (1-D / 2-D / 3-D, stride, padding,
output_padding, dilation, groups), conv3d, grouped and depthwise convolution,
padding='same' / 'valid', reflect / replicate / circular padding, unbatched and
half-precision inputs are lowered to Triton (no library call
for the convolution), alone and with a fused pointwise epilogue, and stay correct in every
kernel form (implicit GEMM, direct; transposed: per-phase, gather, zero-insertion)."""

from __future__ import annotations

from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.families.impl_policy import ImplPolicy
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import one_input_spec

HALF_TOLERANCE = '{"atol": 1e-2, "rtol": 1e-2}'


def _spec(init: list[str], body: str, inputs: str, extra: str | None = None, tolerance: str | None = None) -> str:
    return one_input_spec("convolution", init, body, inputs, extra, tolerance)


# name -> spec: prime sizes, batch 1, non-square and 1x1 kernels, every option combination
CASES: dict[str, str] = {
    "convt2d_s2_p1_op1_relu": _spec(["self.c = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)"],
                                    "torch.relu(self.c(x))", "torch.randn(2, 3, 5, 7)", "torch.randn(1, 3, 3, 2)"),
    "convt1d_groups_dilated": _spec(
        ["self.c = nn.ConvTranspose1d(4, 6, 3, stride=3, padding=2, dilation=2, groups=2, output_padding=1)"],
        "self.c(x)", "torch.randn(2, 4, 7)"),
    "convt3d_nonsquare_scale": _spec(
        ["self.c = nn.ConvTranspose3d(2, 3, (2, 3, 1), stride=(2, 1, 2), padding=(0, 1, 0))"],
        "self.c(x) * 0.5", "torch.randn(1, 2, 3, 4, 5)"),
    "convt2d_functional_groups": _spec(["self.w = nn.Parameter(torch.randn(4, 2, 3, 3))"],
                                       "F.conv_transpose2d(x, self.w, None, 2, 1, 1, 2, 1)", "torch.randn(2, 4, 5, 5)"),
    "convt2d_1x1_nobias": _spec(["self.c = nn.ConvTranspose2d(5, 3, 1, stride=3, bias=False)"], "self.c(x)",
                                "torch.randn(1, 5, 3, 2)"),
    "convt2d_wide_pad_groups": _spec(["self.c = nn.ConvTranspose2d(4, 6, (5, 2), stride=(3, 2), padding=(4, 1), "
                                      "output_padding=(2, 0), groups=2)"], "self.c(x) + 1.0",
                                     "torch.randn(2, 4, 4, 3)", "torch.randn(1, 4, 3, 2)"),
    "conv3d_dilated_gelu": _spec(["self.c = nn.Conv3d(3, 5, 3, stride=(1, 2, 1), padding=1, dilation=(1, 1, 2))"],
                                 "F.gelu(self.c(x))", "torch.randn(2, 3, 5, 6, 7)"),
    "depthwise2d_mult2": _spec(["self.c = nn.Conv2d(6, 12, (3, 2), padding=(1, 0), groups=6)"], "self.c(x)",
                               "torch.randn(2, 6, 7, 5)", "torch.randn(1, 6, 3, 11)"),
    "grouped1d_same": _spec(["self.c = nn.Conv1d(6, 9, 3, padding='same', groups=3, bias=False)"], "self.c(x)",
                            "torch.randn(2, 6, 11)"),
    "conv2d_same_even_kernel": _spec(["self.c = nn.Conv2d(3, 4, (4, 3), padding='same', dilation=(1, 2))"],
                                     "self.c(x)", "torch.randn(1, 3, 7, 9)"),
    "depthwise3d_valid": _spec(["self.c = nn.Conv3d(4, 4, 2, stride=2, padding='valid', groups=4)"],
                               "torch.sigmoid(self.c(x)) + 1.0", "torch.randn(1, 4, 5, 5, 3)"),
    "grouped2d_half": _spec(["self.c = nn.Conv2d(4, 6, 3, groups=2).half()"], "torch.tanh(self.c(x))",
                            "torch.randn(2, 4, 6, 5).half()", tolerance=HALF_TOLERANCE),
    "convt2d_half": _spec(["self.c = nn.ConvTranspose2d(3, 2, 2, stride=2).half()"], "self.c(x)",
                          "torch.randn(1, 3, 3, 5).half()", tolerance=HALF_TOLERANCE),
    "conv2d_reflect_relu": _spec(["self.c = nn.Conv2d(3, 4, 3, padding=(2, 1), dilation=(1, 2), "
                                  "padding_mode='reflect')"],
                                 "torch.relu(self.c(x))", "torch.randn(2, 3, 5, 7)"),
    "conv1d_circular_grouped": _spec(["self.c = nn.Conv1d(4, 4, 5, stride=2, padding=3, groups=2, "
                                      "padding_mode='circular')"], "self.c(x)", "torch.randn(2, 4, 7)"),
    "depthwise3d_replicate_same": _spec(["self.c = nn.Conv3d(3, 3, (1, 3, 2), padding='same', groups=3, "
                                         "padding_mode='replicate')"], "self.c(x)", "torch.randn(1, 3, 2, 5, 3)"),
    "depthwise_convt2d_bf16": _spec(["self.c = nn.ConvTranspose2d(4, 4, 3, stride=2, groups=4).bfloat16()"],
                                    "F.gelu(self.c(x))", "torch.randn(2, 4, 5, 6).bfloat16()",
                                    tolerance='{"atol": 5e-2, "rtol": 5e-2}'),
    "unbatched_convt1d_and_conv2d": _spec(
        ["self.t = nn.ConvTranspose1d(3, 4, 3, stride=2)", "self.c = nn.Conv2d(4, 2, 2, groups=2)",
         "self.s = nn.Parameter(torch.randn(4, 1))"],
        "torch.relu(self.t(x) * self.s), self.c(self.t(x).reshape(4, 3, 5) + 0.5)", "torch.randn(3, 7)"),
}
# (case, genome): every kernel form of the family
FORMS = [
    ("convt2d_s2_p1_op1_relu", {"g0.form": "direct"}),
    ("convt2d_s2_p1_op1_relu", {"g0.transposed": "zero_insert"}),
    ("convt1d_groups_dilated", {"g0.transposed": "zero_insert", "g0.form": "gemm"}),
    ("depthwise2d_mult2", {"g0.form": "gemm"}),
    ("conv3d_dilated_gelu", {"g0.form": "direct"}),
    ("conv2d_reflect_relu", {"g0.form": "direct"}),
    ("convt2d_s2_p1_op1_relu", {"g0.transposed": "gather"}),
    ("depthwise_convt2d_bf16", {"g0.transposed": "gather"}),
    ("convt2d_wide_pad_groups", {"g0.transposed": "gather", "g0.form": "gemm"}),
    ("convt1d_groups_dilated", {"g0.transposed": "phase", "g0.form": "gemm", "g0.reduction": "taps"}),
    ("unbatched_convt1d_and_conv2d", {"g0.transposed": "zero_insert"}),
]
SLOW_FORMS = [(name, genome) for name in CASES for genome in (
    {"g0.form": "gemm"}, {"g0.form": "direct"}, {"g0.transposed": "zero_insert", "g0.form": "gemm"},
    {"g0.transposed": "zero_insert", "g0.form": "direct"}, {"g0.transposed": "gather", "g0.form": "gemm"},
    {"g0.transposed": "gather", "g0.form": "direct"})
    if "g0.transposed" not in genome or "convt" in name]
JUDGED = ["convt3d_nonsquare_scale", "depthwise2d_mult2", "grouped2d_half"]


@pytest.fixture(scope="module")
def synth() -> OfflineSynthesizer:
    """These cases test the Triton convolution kernels: every convolution starts in Triton,
    also in a spec with several (where the seed policy would start them in the library)."""
    return OfflineSynthesizer(policy=ImplPolicy(library_when_several=frozenset()))


def _propose(synth: OfflineSynthesizer, name: str) -> Any:
    (prop,) = synth.propose(ProposalRequest(spec_source=CASES[name], spec_name=name, count=1))
    return prop


def _assert_lowered(source: str, fallback: tuple[str, ...]) -> None:
    assert fallback == ()
    assert "library call" not in source
    assert "@triton.jit" in source and "def launch_conv_" in source


@pytest.mark.parametrize("name", sorted(CASES))
def test_convolution_is_lowered_to_triton(name: str, synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, name)
    _assert_lowered(prop.source, prop.fallback_nodes)
    if name != "unbatched_convt1d_and_conv2d":  # one conv and its epilogue: one kernel
        assert prop.source.count("def launch_") == 1


def test_seed_candidates_are_correct(synth: OfflineSynthesizer) -> None:
    jobs = [{"id": name, "spec_source": src, "candidate_source": _propose(synth, name).source, "seeds": [1]}
            for name, src in CASES.items()]
    results = run_in_subprocess(jobs)
    bad = [(r["id"], r["error"][-400:], r["trials"]) for r in results if not r["ok"]]
    assert not bad
    # the odd extra shapes ran
    extras = sum("get_extra_inputs" in src for src in CASES.values())
    assert sum(t["kind"] == "extra" for r in results for t in r["trials"]) == extras


def _forms_correct(synth: OfflineSynthesizer, forms: list[tuple[str, dict[str, str]]]) -> None:
    jobs = []
    for name, genome in forms:
        source, completed, fallback = synth.lower(synth._capture(CASES[name], name), genome)
        _assert_lowered(source, fallback)
        assert all(completed[k] == v for k, v in genome.items())
        jobs.append({"id": f"{name} {genome}", "spec_source": CASES[name], "candidate_source": source, "seeds": [1]})
    bad = [(r["id"], r["error"][-400:]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad


def test_kernel_forms_are_correct(synth: OfflineSynthesizer) -> None:
    _forms_correct(synth, FORMS)


@pytest.mark.slow
def test_every_form_of_every_case_is_correct(synth: OfflineSynthesizer) -> None:
    _forms_correct(synth, SLOW_FORMS)


def test_knobs_follow_the_form(synth: OfflineSynthesizer) -> None:
    dw = dict(synth.space(CASES["depthwise2d_mult2"], "depthwise2d_mult2"))
    assert dw["g0.form"] == ["auto", "gemm"]  # auto is direct for depthwise
    assert "g0.BLOCK_SIZE" in dw and "g0.BLOCK_K" not in dw and "g0.transposed" not in dw
    ct = dict(synth.space(CASES["convt2d_s2_p1_op1_relu"], "convt2d_s2_p1_op1_relu"))
    assert ct["g0.form"] == ["auto", "direct"] and ct["g0.transposed"] == ["phase", "gather", "zero_insert"]
    assert "g0.BLOCK_K" in ct and "g0.BLOCK_SIZE" not in ct
    assert ct["impl.c"] == ["triton", "library"]  # the relu keeps a Triton kernel either way


def test_library_impl_keeps_the_epilogue_in_triton(synth: OfflineSynthesizer) -> None:
    name = "convt2d_s2_p1_op1_relu"
    source, _, fallback = synth.lower(synth._capture(CASES[name], name), {"impl.c": "library"})
    assert fallback == ("c",) and "def launch_conv_" not in source and "@triton.jit" in source
    (result,) = run_in_subprocess([{"id": name, "spec_source": CASES[name], "candidate_source": source,
                                    "seeds": [1]}])
    assert result["ok"], result["error"][-400:]


def _judged(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    verdict = judge.evaluate(CASES[name], _propose(synth, name).source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"


@pytest.mark.parametrize("name", JUDGED)
def test_seed_is_judged_correct(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    _judged(name, synth, judge)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(CASES) - set(JUDGED)))
def test_every_seed_is_judged_correct(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    _judged(name, synth, judge)
