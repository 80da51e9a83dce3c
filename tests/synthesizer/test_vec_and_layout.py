"""Two genome knobs on memory access: ``VEC`` of flat pointwise groups (offsets declared in
aligned runs of 4 with a mask bound rounded to a multiple of 4, and a launcher that falls
back to VEC=1 when the element count or an input's alignment does not allow it) and
``layout`` of conv2d groups (channels_last: NHWC input / OHWI weight, reduction over
(kh, kw, cin), NCHW output). The knobs appear only where legal, change the source as
intended, and the candidates are correct in the interpreter, also on inputs that take
the fallback path. The interpreter ignores Triton's hints, but not the rounded mask bound:
a VEC=4 launch on a bad element count would drop the tail and fail the checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import Transformation
from tests.kernel_files import import_source

from .conftest import example_source, lower_example, seed_children

# contiguous slices of a [R, 21] input start 84 bytes in (not 16-byte aligned); those of a
# [R, 20] input 80 bytes in (aligned)
SLICED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.sigmoid(x[1:]) * y[1:] + 1.0


def get_inputs():
    return [torch.randn(9, 21), torch.randn(9, 21)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(6, 20), torch.randn(6, 20)], [torch.randn(4, 3), torch.randn(4, 3)]]
'''

# one input channel: NCHW and NHWC strides coincide (no copy); 1x1 images in the extras
ONE_CHANNEL_CONV = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 5, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.conv(x))


def get_inputs():
    return [torch.randn(2, 1, 6, 7)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 1, 1, 1)], [torch.randn(1, 1, 4, 9)]]
'''



def test_vec_only_for_flat_pointwise_groups(synth: OfflineSynthesizer) -> None:
    for name in ("gelu_tanh_chain", "silu_clamp_mul"):
        assert dict(synth.space(example_source(name), name))["g0.VEC"] == ["auto", "4"]
    assert dict(synth.space(SLICED, "sliced"))["g0.VEC"] == ["auto", "4"]
    # relu_scale_add reads its bias through broadcast strides; conv / row groups have no VEC
    for name in ("relu_scale_add", "conv2d_bias_relu", "layernorm"):
        assert not [k for k, _ in synth.space(example_source(name), name) if k.endswith(".VEC")], name
    source, full, _ = lower_example(synth, "relu_scale_add", {"g0.VEC": "4"})
    assert "g0.VEC" not in full and "VEC" not in source


def test_vec_changes_the_kernel_and_the_launcher(synth: OfflineSynthesizer) -> None:
    plain, full, _ = lower_example(synth, "gelu_tanh_chain", {})
    assert full["g0.VEC"] == "auto" and "VEC" not in plain and "max_contiguous" not in plain
    vec, full, _ = lower_example(synth, "gelu_tanh_chain", {"g0.VEC": "4"})
    assert full["g0.VEC"] == "4"
    assert "BLOCK_SIZE: tl.constexpr, VEC: tl.constexpr," in vec
    assert "offs = tl.max_contiguous(tl.multiple_of(offs, VEC), VEC)" in vec
    assert "mask = offs < n_elements // VEC * VEC" in vec
    assert "    # VEC=4: offsets in aligned runs of 4" in vec  # the kernel comment names the knob
    assert "vec = 4 if n % 4 == 0 and t0.data_ptr() % 16 == 0 and t1.data_ptr() % 16 == 0 else 1" in vec
    assert "BLOCK_SIZE=block, VEC=vec, num_warps=4)" in vec
    # the rest of the module is the same
    assert {line for line in plain.splitlines()} - {line for line in vec.splitlines()} == {
        "    BLOCK_SIZE: tl.constexpr,", "    mask = offs < n_elements",
        "        pointwise_gelu_sub_tanh_sigmoid_etc_0[grid](t0, t1, out0, n, BLOCK_SIZE=block, num_warps=4)"}


def test_vec_is_a_recorded_transformation(synth: OfflineSynthesizer) -> None:
    (child,) = [c for c in seed_children(synth, "gelu_tanh_chain") if c.transformation.name == "VEC"]
    assert child.transformation == Transformation("VEC", {"group": "g0", "value": "4"})
    assert "tl.max_contiguous" in child.source


class _Recorder:
    """Stands in for a kernel: records the keyword arguments of each ``kernel[grid](...)``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __getitem__(self, grid: Any):
        return lambda *args, **kwargs: self.calls.append(kwargs)


def test_launcher_checks_count_and_alignment(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    source, _, _ = lower_example(synth, "gelu_tanh_chain", {"g0.VEC": "4"})
    mod = import_source(tmp_path, "cand_vec", source)
    rec = _Recorder()
    setattr(mod, "pointwise_gelu_sub_tanh_sigmoid_etc_0", rec)  # noqa: B010 - the name is generated
    launch = mod.launch_pointwise_gelu_sub_tanh_sigmoid_etc_0
    a = torch.randn(8, 20)
    unaligned = torch.randn(9, 21)[1:]  # contiguous, 84 bytes into its storage, 168 elements
    assert unaligned.is_contiguous() and unaligned.data_ptr() % 16 and unaligned.numel() % 4 == 0
    cases = [
        ((a, a), 4),
        ((torch.randn(7, 333), torch.randn(7, 333)), 1),  # 2331 elements
        ((unaligned, torch.randn(8, 21)), 1),
        ((torch.randn(8, 21), unaligned), 1),
        ((torch.randn(20, 8).t(), a), 4),  # made contiguous first: a fresh, aligned copy
    ]
    for (x, y), want in cases:
        launch(x, y)
        assert rec.calls[-1]["VEC"] == want, (tuple(x.shape), want)


def test_channels_last_only_for_conv2d(synth: OfflineSynthesizer) -> None:
    for name in ("conv2d_bias_relu", "conv2d_strided_residual", "model_conv_block"):
        assert dict(synth.space(example_source(name), name))["g0.layout"] == ["contiguous", "channels_last"]
    for name in ("conv1d_dilated_gelu", "gelu_tanh_chain", "mm_plain"):
        assert not [k for k, _ in synth.space(example_source(name), name) if k.endswith(".layout")], name
    source, full, _ = lower_example(synth, "conv1d_dilated_gelu", {"g0.layout": "channels_last"})
    assert "g0.layout" not in full and "channels_last" not in source


def test_channels_last_changes_the_conv_kernel(synth: OfflineSynthesizer) -> None:
    plain, full, _ = lower_example(synth, "conv2d_bias_relu", {})
    assert full["g0.layout"] == "contiguous" and "channels_last" not in plain
    assert "ci = rk // (KH * KW)" in plain and "    x = x.contiguous()" in plain
    nhwc, full, _ = lower_example(synth, "conv2d_bias_relu", {"g0.layout": "channels_last"})
    assert full["g0.layout"] == "channels_last"
    assert "# reduction over (kh, kw, cin) with stride 1x1" in nhwc
    assert "    # layout=channels_last: NHWC input and OHWI weight" in nhwc
    assert "ci = rk % CIN" in nhwc and "((n_idx[:, None] * H + ih) * W + iw) * CIN + ci[None, :]" in nhwc
    assert "    x = x.contiguous(memory_format=torch.channels_last)" in nhwc
    assert "    w = w.contiguous(memory_format=torch.channels_last)" in nhwc
    # the output is written NCHW, as the reference returns it
    assert "out0 = torch.empty(shape, device=x.device, dtype=torch.float32)" in nhwc
    assert "out_off = (n_idx[:, None] * COUT + cols) * (OH * OW)" in nhwc


def test_candidates_are_correct_in_the_interpreter(synth: OfflineSynthesizer) -> None:
    cases: list[tuple[str, str | None, dict[str, str]]] = [
        ("gelu_tanh_chain", None, {"g0.VEC": "4"}),  # extra inputs: 2331 elements, VEC=1
        ("silu_clamp_mul", None, {"g0.VEC": "4", "g0.programs": "128", "g0.BLOCK_SIZE": "256"}),
        ("sliced", SLICED, {"g0.VEC": "4"}),  # unaligned views, then an aligned one, then 9 elements
        ("conv2d_bias_relu", None, {"g0.layout": "channels_last"}),
        ("conv2d_strided_residual", None, {"g0.layout": "channels_last", "g0.BLOCK_K": "16"}),
        ("model_conv_block", None, {"g0.layout": "channels_last"}),
        ("one_channel_conv", ONE_CHANNEL_CONV, {"g0.layout": "channels_last"}),
    ]
    jobs = []
    for name, src, genome in cases:
        src = src or example_source(name)
        source, full, fallback = lower_example(synth, name, genome, src)
        assert not fallback and all(full[k] == v for k, v in genome.items()), (name, full)
        jobs.append({"id": name, "spec_source": src, "candidate_source": source, "seeds": [3]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-400:], r["trials"]) for r in results if not r["ok"]]
    assert all(len(r["trials"]) >= 2 for r in results)  # the extra inputs ran too


@pytest.mark.parametrize("name,genome", [("gelu_tanh_chain", {"g0.VEC": "4"}),
                                         ("conv2d_bias_relu", {"g0.layout": "channels_last"})])
def test_judged_by_the_evaluator(name: str, genome: dict[str, str], synth: OfflineSynthesizer,
                                 judge: Judge) -> None:
    """The evaluator's protocol: output strides as the reference's, kernels the output
    depends on (converted NHWC copies are fresh per call, so its NaN probe cannot leave a
    stale one behind)."""
    src = example_source(name)
    source, _, _ = lower_example(synth, name, genome)
    verdict = judge.evaluate(src, source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
