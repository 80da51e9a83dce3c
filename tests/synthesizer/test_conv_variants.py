"""Kernel variants of the convnd family: the GEMM form's two reductions (knob
``reduction``: ``taps``, the taps outside and channel blocks inside over a packed weight, or
``flat``, tap x channel in one K), a channels-last input for the taps reduction
(``layout``), split-K (``SPLIT_K``) and the register-tiled direct form (``direct`` =
``tiled``). Transposed convolution by phase (sub-pixel) decomposition, the default: each of
the stride^nd output phases is a dense implicit GEMM over its own taps (or, in the direct
form, a grid slice of lanes walking only their phase's taps). Odd shapes in 1-D / 2-D / 3-D
(stride 1 / 2 / 3, asymmetric kernels, padding wider than the kernel, output_padding,
dilation sharing a factor with the stride so that some phases have no tap at all, groups,
batch 1, 3 / 5 / 7 channels, fp32 / fp16 / bf16), and plain convolutions (padding modes,
'same', dilation, groups) run in the Triton interpreter against eager."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess

from .conftest import one_input_spec

HALF = '{"atol": 1e-2, "rtol": 1e-2}'  # the evaluator's fp16 / bf16 default, written out


def _spec(init: str, body: str, inputs: str, tolerance: str | None = None) -> str:
    return one_input_spec("convolution", [f"self.c = {init}"], body, inputs, tolerance=tolerance)


# name -> spec; the interpreter sizes stay small (about a second a case)
CASES: dict[str, str] = {
    "t1d_s3_k4_p2_op1_c5_c7": _spec("nn.ConvTranspose1d(5, 7, 4, stride=3, padding=2, output_padding=1)",
                                    "self.c(x)", "torch.randn(1, 5, 6)"),
    # gcd(stride 2, dilation 2) = 2: odd phases read no tap (bias only)
    "t1d_s2_d2_tapless_phases": _spec("nn.ConvTranspose1d(3, 5, 3, stride=2, padding=1, dilation=2)",
                                      "self.c(x)", "torch.randn(2, 3, 5)"),
    "t2d_asym_3x5_s2x3_op": _spec("nn.ConvTranspose2d(3, 5, (3, 5), stride=(2, 3), padding=(1, 2), "
                                  "output_padding=(1, 0))", "self.c(x)", "torch.randn(1, 3, 5, 4)"),
    "t2d_s1_single_phase_c7": _spec("nn.ConvTranspose2d(7, 3, (2, 3), stride=1, padding=1)", "self.c(x)",
                                    "torch.randn(2, 7, 4, 5)"),
    "t2d_groups3_dilated_s3x2": _spec("nn.ConvTranspose2d(6, 9, 3, stride=(3, 2), padding=(2, 1), "
                                      "output_padding=(1, 1), dilation=(2, 3), groups=3)",
                                      "self.c(x)", "torch.randn(1, 6, 4, 3)"),
    # CIN_G >= 16: reduction auto walks one tap's channels per K tile
    "t2d_c20_s2_k4_relu": _spec("nn.ConvTranspose2d(20, 5, 4, stride=2, padding=1)",
                                "torch.clamp(self.c(x), -0.5, 0.5)", "torch.randn(1, 20, 4, 3)"),
    "t2d_pad_wider_than_kernel": _spec("nn.ConvTranspose2d(3, 3, 2, stride=3, padding=3, output_padding=(2, 1))",
                                       "self.c(x)", "torch.randn(1, 3, 6, 5)"),
    "t3d_asym_dilated": _spec("nn.ConvTranspose3d(3, 5, (3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1), "
                              "output_padding=(1, 0, 2), dilation=(1, 2, 1))", "self.c(x)",
                              "torch.randn(1, 3, 3, 4, 3)"),
    "t3d_groups2_s2": _spec("nn.ConvTranspose3d(4, 6, 2, stride=2, groups=2, bias=False)", "self.c(x) * 0.5",
                            "torch.randn(2, 4, 2, 3, 2)"),
    "t2d_half_3x5": _spec("nn.ConvTranspose2d(5, 3, (3, 5), stride=2, padding=(0, 2)).half()", "self.c(x)",
                          "torch.randn(1, 5, 4, 3).half()", HALF),
    "t3d_bf16_s2": _spec("nn.ConvTranspose3d(3, 3, 3, stride=2, padding=1, output_padding=1).bfloat16()",
                         "self.c(x)", "torch.randn(1, 3, 2, 3, 2).bfloat16()", HALF),
    "t1d_depthwise_s2": _spec("nn.ConvTranspose1d(3, 3, 5, stride=2, padding=2, groups=3)", "self.c(x)",
                              "torch.randn(2, 3, 7)"),
}
# plain convolutions the convnd family takes (conv3d, groups, padding modes, 'same', half)
PLAIN: dict[str, str] = {
    # 17 input channels: auto is taps, with a ragged channel block
    "c3d_c17_asym_dilated": _spec("nn.Conv3d(17, 5, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1), "
                                  "dilation=(2, 1, 1))", "self.c(x)", "torch.randn(1, 17, 5, 5, 4)"),
    "c2d_groups3_reflect_3x5": _spec("nn.Conv2d(6, 9, (3, 5), padding=(1, 2), groups=3, padding_mode='reflect')",
                                     "torch.relu(self.c(x))", "torch.randn(2, 6, 5, 7)"),
    "c1d_circular_s3": _spec("nn.Conv1d(5, 7, 4, stride=3, padding=2, padding_mode='circular')", "self.c(x)",
                             "torch.randn(1, 5, 11)"),
    "c2d_same_replicate_half": _spec("nn.Conv2d(3, 5, (2, 3), padding='same', dilation=(2, 1), "
                                     "padding_mode='replicate').half()", "self.c(x)",
                                     "torch.randn(1, 3, 6, 5).half()", HALF),
    "c3d_groups2_bf16": _spec("nn.Conv3d(4, 6, 2, stride=2, groups=2).bfloat16()", "self.c(x)",
                              "torch.randn(2, 4, 3, 4, 5).bfloat16()", HALF),
}
# lone convolutions (no epilogue: split-K applies) with small outputs and a long K, so that
# every one of 4 slices of BLOCK_K = 16 sums a part
SPLIT: dict[str, str] = {
    "c3d_c40_small_out": _spec("nn.Conv3d(40, 6, 3, stride=2, padding=1)", "self.c(x)",
                               "torch.randn(1, 40, 3, 4, 3)"),
    "t2d_c36_s2_lone": _spec("nn.ConvTranspose2d(36, 5, 3, stride=2, bias=False)", "self.c(x)",
                             "torch.randn(1, 36, 3, 2)"),
    "t1d_c70_groups2_s3": _spec("nn.ConvTranspose1d(70, 6, 2, stride=3, groups=2)", "self.c(x)",
                                "torch.randn(2, 70, 3)"),
}
REDUCTIONS = ("taps", "flat")


def _lower(synth: OfflineSynthesizer, specs: dict[str, str], genome: dict[str, str]) -> dict[tuple[str, str], str]:
    """(case, reduction) -> candidate source of ``genome`` with each reduction."""
    out = {}
    for name, src in specs.items():
        captured = synth._capture(src, name)
        for reduction in REDUCTIONS:
            source, completed, fallback = synth.lower(captured, {**genome, "g0.reduction": reduction})
            assert fallback == () and completed["g0.reduction"] == reduction
            assert all(completed[k] == v for k, v in genome.items())
            out[(name, reduction)] = source
    return out


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[tuple[str, str], str]:
    """(case, reduction) -> candidate source in the GEMM form's phase decomposition."""
    return _lower(synth, CASES, {"g0.form": "gemm", "g0.transposed": "phase"})


def _match_eager(specs: dict[str, str], sources: dict[tuple[str, str], str]) -> None:
    jobs = [{"id": f"{name} {reduction}", "spec_source": specs[name], "candidate_source": source, "seeds": [1]}
            for (name, reduction), source in sources.items()]
    results = run_in_subprocess(jobs)
    assert len(results) == len(jobs)
    bad = [(r["id"], r["error"][-400:]) for r in results if not r["ok"]]
    assert not bad


def test_phase_candidates_match_eager(lowered: dict[tuple[str, str], str]) -> None:
    _match_eager(CASES, lowered)


def test_direct_phase_matches_eager(synth: OfflineSynthesizer) -> None:
    """The direct form's phase body (grid axis 1 = phase, lanes walk only its taps)."""
    sources = {}
    for name, src in CASES.items():
        source, completed, fallback = synth.lower(synth._capture(src, name), {"g0.form": "direct"})
        assert fallback == () and completed["g0.transposed"] == "phase"
        assert "ph = tl.program_id(1)" in source and "% 2 == 0)" not in source.split("acc = tl.zeros")[1]
        sources[(name, "direct")] = source
    _match_eager(CASES, sources)


def test_plain_and_zero_insert_reductions_match_eager(synth: OfflineSynthesizer) -> None:
    """The taps reduction of plain convolutions (padding folded per row) and of the
    zero-insertion form of transposed ones (a stride-1 conv over the regrouped weight)."""
    sources = _lower(synth, PLAIN, {"g0.form": "gemm"})
    zero = {k: CASES[k] for k in ("t2d_asym_3x5_s2x3_op", "t1d_s2_d2_tapless_phases", "t3d_groups2_s2")}
    sources |= _lower(synth, zero, {"g0.form": "gemm", "g0.transposed": "zero_insert"})
    _match_eager(PLAIN | zero, sources)


def test_phase_kernel_is_dense(lowered: dict[tuple[str, str], str]) -> None:
    """No tap of the reduction is tested for divisibility by the stride (the gather form's
    ``t % s == 0``); every K tile goes through tl.dot; one launch for all phases."""
    for (name, _), source in lowered.items():
        kernel = source.split("def _remember")[0]
        assert "tl.dot(" in kernel, name
        assert not re.search(r"% \d+ == 0\)", kernel.split("acc = tl.zeros")[1]), name
        assert source.count("[grid](") == 1, name


def test_phase_is_the_default_of_the_gemm_form(synth: OfflineSynthesizer) -> None:
    name = "t2d_c20_s2_k4_relu"
    space = dict(synth.space(CASES[name], name))
    assert space["g0.transposed"] == ["phase", "gather", "zero_insert"]
    assert space["g0.reduction"] == ["auto", "flat"]  # auto is taps at 20 input channels
    _, genome, _ = synth.lower(synth._capture(CASES[name], name), {})
    assert genome["g0.transposed"] == "phase" and genome["g0.form"] == "auto"
    # the direct form (auto for depthwise) has its own phase body and no reduction knob
    dw = dict(synth.space(CASES["t1d_depthwise_s2"], "t1d_depthwise_s2"))
    assert dw["g0.transposed"] == ["phase", "gather", "zero_insert"] and "g0.reduction" not in dw
    # plain convolutions: reduction in the GEMM form (auto: flat at 5 input channels, taps at 17)
    plain = dict(synth.space(PLAIN["c1d_circular_s3"], "c1d_circular_s3"))
    assert plain["g0.reduction"] == ["auto", "taps"]
    wide = dict(synth.space(PLAIN["c3d_c17_asym_dilated"], "c3d_c17_asym_dilated"))
    assert wide["g0.reduction"] == ["auto", "flat"]


def test_split_k_matches_eager(synth: OfflineSynthesizer) -> None:
    """SPLIT_K = 4 slices of K (flat) or of the channels (taps), added atomically into a
    zeroed output, the bias by slice 0 only."""
    sources = _lower(synth, SPLIT, {"g0.form": "gemm", "g0.SPLIT_K": "4", "g0.BLOCK_K": "16"})
    for source in sources.values():
        assert "tl.atomic_add(out0_ptr" in source and "torch.zeros(shape" in source
    _match_eager(SPLIT, sources)
    # a pointwise epilogue cannot run on partial sums: no SPLIT_K knob there
    space = dict(synth.space(CASES["t2d_c20_s2_k4_relu"], "t2d_c20_s2_k4_relu"))
    assert "g0.SPLIT_K" not in space
    assert dict(synth.space(SPLIT["c3d_c40_small_out"], "c3d_c40_small_out"))["g0.SPLIT_K"] == ["1", "2", "4"]


def _spec_with(init: list[str], body: str, inputs: str, tolerance: str | None = None) -> str:
    return one_input_spec("convolution", init, body, inputs, tolerance=tolerance)


# depthwise / thin-group convolutions for the register-tiled direct form: strided, dilated,
# padding modes, a broadcast per-channel scale in the epilogue, an output row wider than a
# tile (BLOCK_SIZE 128: two tiles along W), unbatched, bf16
TILED: dict[str, str] = {
    "dw2d_scale_epilogue": _spec_with(["self.c = nn.Conv2d(5, 5, (3, 5), stride=(2, 1), padding=(1, 2), "
                                       "dilation=(1, 2), groups=5)", "self.s = nn.Parameter(torch.randn(5, 1, 1))"],
                                      "self.c(x) * self.s + x[:, :, ::2, 2:7]", "torch.randn(2, 5, 7, 9)"),
    "dw3d_reflect_mult2": _spec_with(["self.c = nn.Conv3d(3, 6, 3, padding=1, groups=3, padding_mode='reflect')"],
                                     "self.c(x)", "torch.randn(1, 3, 4, 5, 6)"),
    "dw1d_bf16_s3": _spec_with(["self.c = nn.Conv1d(7, 7, 4, stride=3, padding=2, groups=7).bfloat16()"],
                               "self.c(x)", "torch.randn(1, 7, 20).bfloat16()", HALF),
    "dw2d_unbatched_wide": _spec_with(["self.c = nn.Conv2d(3, 3, 3, groups=3)"], "torch.relu(self.c(x))",
                                      "torch.randn(3, 5, 152)"),
}


def test_tiled_direct_matches_eager(synth: OfflineSynthesizer) -> None:
    """One BLOCK_H x BLOCK_W tile of an output plane per program, scalar weights per tap."""
    jobs = []
    plain = {k: v for k, v in PLAIN.items() if k != "c3d_c17_asym_dilated"}  # 306 unrolled taps: slow here
    specs = TILED | plain | {"t1d_depthwise_s2": CASES["t1d_depthwise_s2"]}
    for name, src in specs.items():
        genome = {"g0.form": "direct", "g0.direct": "tiled", "g0.BLOCK_SIZE": "128"}
        if name.startswith("t1d"):  # transposed: the zero-insertion form runs a plain conv
            genome["g0.transposed"] = "zero_insert"
        source, completed, fallback = synth.lower(synth._capture(src, name), genome)
        assert fallback == () and all(completed[k] == v for k, v in genome.items()), name
        assert "BLOCK_H: tl.constexpr" in source
        jobs.append({"id": name, "spec_source": src, "candidate_source": source, "seeds": [1]})
    bad = [(r["id"], r["error"][-400:]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad
    # the transposed phase / gather bodies keep one lane per output
    assert "g0.direct" not in dict(synth.space(CASES["t1d_depthwise_s2"], "t1d_depthwise_s2"))
    assert dict(synth.space(TILED["dw3d_reflect_mult2"], "dw3d_reflect_mult2"))["g0.direct"] == ["lanes", "tiled"]


def test_channels_last_taps_match_eager(synth: OfflineSynthesizer) -> None:
    """layout = channels_last: the launcher moves channels innermost (a view of a
    channels_last input), the taps reduction reads a row's channel block contiguously."""
    specs = {k: CASES[k] for k in ("t2d_asym_3x5_s2x3_op", "t3d_asym_dilated", "t1d_s2_d2_tapless_phases",
                                   "t2d_half_3x5")}
    specs |= PLAIN | SPLIT
    # an input that already is channels_last (no copy in the launcher)
    specs["t2d_input_channels_last"] = _spec("nn.ConvTranspose2d(20, 5, 4, stride=2, padding=1)", "self.c(x)",
                                             "torch.randn(2, 20, 4, 3).to(memory_format=torch.channels_last)")
    jobs = []
    for name, src in specs.items():
        genome = {"g0.form": "gemm", "g0.reduction": "taps", "g0.layout": "channels_last"}
        if name in SPLIT:
            genome |= {"g0.SPLIT_K": "4", "g0.BLOCK_K": "16"}
        if name == "t1d_s2_d2_tapless_phases":  # the zero-spread input read channels-last
            genome["g0.transposed"] = "zero_insert"
        source, completed, fallback = synth.lower(synth._capture(src, name), genome)
        assert fallback == () and all(completed[k] == v for k, v in genome.items()), name
        assert ".movedim(1, -1).contiguous()" in source and "ci[None, :] * DHW" not in source, name
        jobs.append({"id": name, "spec_source": src, "candidate_source": source, "seeds": [1]})
    bad = [(r["id"], r["error"][-400:]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad
    # the flat reduction has no channels-last addressing
    flat = dict(synth.space(CASES["t1d_s3_k4_p2_op1_c5_c7"], "t1d_s3_k4_p2_op1_c5_c7"))
    assert "g0.layout" not in flat and flat["g0.reduction"] == ["auto", "taps"]


# Runs in a child with the interpreter: the candidate's packed weight is reused across calls
# and re-packed when the weight changes in place or is replaced.
_PACKED_CHECK = '''
import importlib.util, json, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
ref, cand = load(sys.argv[1], "ref"), load(sys.argv[2], "cand")
torch.manual_seed(3)
m_ref = ref.Model()
torch.manual_seed(3)
m_new = cand.ModelNew()
x = ref.get_inputs()[0]
(pack,) = [v for k, v in vars(cand).items() if k.startswith("_packed_")]
errors, packed = [], []
with torch.no_grad():
    for step in range(4):
        if step == 2:  # in place: same tensor, new version
            m_ref.c.weight.mul_(-1.5)
            m_new.c.weight.mul_(-1.5)
        if step == 3:  # a new parameter
            w = torch.randn_like(m_ref.c.weight)
            m_ref.c.weight = torch.nn.Parameter(w.clone())
            m_new.c.weight = torch.nn.Parameter(w.clone())
        errors.append(float((m_new(x) - m_ref(x)).abs().max()))
        packed.append(id(pack[3]))
print(json.dumps({"errors": errors, "reused": packed[0] == packed[1],
                  "repacked": [packed[1] != packed[2], packed[2] != packed[3]]}))
'''


def test_packed_weight_is_reused_and_never_stale(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    """The phase form packs the weight once per weight tensor and version: the second call
    reuses it; an in-place update or a new parameter re-packs (a stale pack would give the
    old weight's output)."""
    import os
    import subprocess
    import sys

    name = "t2d_c20_s2_k4_relu"
    source, genome, fallback = synth.lower(synth._capture(CASES[name], name), {})
    assert fallback == () and genome["g0.transposed"] == "phase" and "pk[:] = [w, w._version" in source
    (tmp_path / "ref.py").write_text(CASES[name])
    (tmp_path / "cand.py").write_text(source)
    proc = subprocess.run([sys.executable, "-c", _PACKED_CHECK, str(tmp_path / "ref.py"), str(tmp_path / "cand.py")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert max(got["errors"]) < 1e-3 and got["reused"] and got["repacked"] == [True, True], got
