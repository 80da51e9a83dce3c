"""Limits that real sizes reach and interpreter-sized tests never do (``emit/grid.py``).

- CUDA's grid: at most 65535 programs on axes 1 and 2. The real-size specs are lowered,
  their candidates' forwards run on the meta device with every kernel replaced by a
  recorder, and every launch grid is checked (a windowed attention of 256 maps had
  65,536 batched products on axis 1, ``invalid argument`` on the GPU).
- 64-bit offsets: a kernel launched on a tensor of 2**31 elements or more must compute
  its offsets in int64 (the ids widened), and a kernel whose tensors stay below keeps
  int32.
- Both code paths at interpreter size, forced: the folded grid by lowering the launch
  helper's axis limit in the candidate source, the int64 path by lowering the threshold
  ``grid.INT64_NUMEL`` for the lowering; every family, odd shapes, correct against the
  reference in the interpreter.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit import grid as grid_module
from ke_synthesizer.offline.families.impl_policy import ImplPolicy
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import example_source, lower_example

LARGE_DIR = Path(__file__).resolve().parents[2] / "examples" / "large"
LIMIT_LINE = "_GRID_AXIS_LIMIT = 65535"
WIDE_LINE = ".to(tl.int64)  # 64-bit offsets"


def _kernel_sources(source: str) -> dict[str, str]:
    """Name -> source of every ``@triton.jit`` kernel of a candidate module."""
    chunks = source.split("@triton.jit\n")[1:]
    return {c.split("(", 1)[0].removeprefix("def "): c.split("\n\n\n", 1)[0] for c in chunks}


def _launches(spec_source: str, candidate_source: str, tmp_path: Path) -> list[tuple[str, tuple[int, ...], list[Any]]]:
    """(kernel, grid, arguments) of every launch of the candidate's forward on the spec's
    inputs built on the meta device (no memory, no kernel run: kernels are recorders)."""
    path = tmp_path / "candidate.py"  # triton.jit reads kernel source from a file
    path.write_text(candidate_source)
    mod_spec = importlib.util.spec_from_file_location(f"cand_{abs(hash(candidate_source))}", path)
    assert mod_spec is not None and mod_spec.loader is not None
    cand = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(cand)
    spec: dict[str, Any] = {}
    exec(compile(spec_source, "spec.py", "exec"), spec)  # noqa: S102 - our own example spec
    launched: list[tuple[str, tuple[int, ...], list[Any]]] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getitem__(self, grid: tuple[int, ...]) -> Any:
            return lambda *args, **kwargs: launched.append((self.name, tuple(grid), list(args)))

    for name in _kernel_sources(candidate_source):
        setattr(cand, name, Recorder(name))
    with torch.device("meta"):
        inputs = spec["get_inputs"]()
    cand.ModelNew(*spec["get_init_inputs"]()).to("meta")(*inputs)
    return launched


def _seed(synth: OfflineSynthesizer, name: str) -> tuple[str, str]:
    src = (LARGE_DIR / f"{name}.py").read_text()
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    return src, prop.source


# window_attention: 65,536 batched products (the GPU's `invalid argument`);
# conv_transpose2d_upsample: an output of exactly 2**31 elements; conv2d_large_batch:
# 1.64e9 elements (6.1 GiB), below 2**31, so int32 offsets are exact and stay
REAL_SIZE = ["window_attention", "conv_transpose2d_upsample", "conv2d_large_batch"]
# every other real-size spec except the two recurrent ones (minutes of lowering)
MORE_REAL_SIZE = ["densenet_blocks", "gemm_bias_gelu", "layernorm_large", "mobilenet_inverted_residual",
                  "pointwise_chain", "resnet50_bottleneck", "rmsnorm_gate", "row_range_reduction",
                  "selective_scan_chunked", "shufflenet_channel_shuffle", "softmax_wide", "unet_segmentation"]


def _check_real_size(synth: OfflineSynthesizer, name: str, tmp_path: Path) -> list[tuple[str, tuple[int, ...]]]:
    src, source = _seed(synth, name)
    launches = _launches(src, source, tmp_path)
    assert launches, name
    kernels = _kernel_sources(source)
    for kernel, grid, args in launches:
        assert grid[0] <= 2**31 - 1 and all(g <= 65535 for g in grid[1:]), (name, kernel, grid)
        largest = max((a.numel() for a in args if isinstance(a, torch.Tensor)), default=0)
        # the kernel's ids are int64 exactly when it touches 2**31 elements or more
        assert (WIDE_LINE in kernels[kernel]) == (largest >= grid_module.INT64_NUMEL), (name, kernel, largest)
    return [(k, g) for k, g, _ in launches]


@pytest.mark.parametrize("name", REAL_SIZE)
def test_real_size_grids_and_offsets(name: str, synth: OfflineSynthesizer, tmp_path: Path) -> None:
    launches = _check_real_size(synth, name, tmp_path)
    if name == "window_attention":  # the batched products were the over-limit launches: folded now
        # (one flash kernel with the relative position bias as an additive mask)
        assert [g for k, g in launches if k.startswith("flash_attention")] == [(65536,)]
        assert not [k for k, _ in launches if k.startswith("matmul_matmul")]


@pytest.mark.slow
@pytest.mark.parametrize("name", MORE_REAL_SIZE)
def test_more_real_size_grids_and_offsets(name: str, synth: OfflineSynthesizer, tmp_path: Path) -> None:
    _check_real_size(synth, name, tmp_path)


# every family with a grid of more than one axis: batched matmul (3-D, 4-D, einsum),
# attention (plain, causal, cross, masked), conv (2-D), convnd (3-D same, grouped, transposed)
MULTI_AXIS = ["bmm_scale", "matmul_4d", "einsum_attention_scores", "attention_plain",
              "sdpa_causal", "sdpa_cross", "sdpa_padding_mask", "attention_padding_fill",
              "conv2d_bias_relu", "conv2d_half_grouped", "conv3d_same_residual",
              "convtranspose2d_grouped_functional", "convtranspose1d_upsample_leaky"]
# the one-axis families too for the int64 path: pointwise (broadcast, pitched), rows
# (single, index outputs, columns, mid dims, scans, std), pools, a whole model
# (and a broadcast matmul, whose batch folds into rows)
ONE_AXIS = ["matmul_broadcast", "relu_scale_add", "glu_sigmoid", "tanh_row_broadcast", "layernorm", "argmax_rows",
            "col_mean", "log_softmax_mid", "cumsum_rows", "std_cols", "maxpool2d_relu", "avgpool3d_padded",
            "model_cnn_head"]
# convnd forms past the seeds'. Two or three grid axes (folded): the plain GEMM (row tiles,
# column tiles, groups x SPLIT_K; taps reduction, channels-last, split-K), the transposed
# gather GEMM, the direct phase form (lanes, phases). The transposed convolutions' default,
# the phase GEMM, is one 1-D grid (phase, group, tiles): in the fold cases they take a form
# of several axes instead
CONVND_FOLD_FORMS = {"convtranspose2d_grouped_functional": {"g0.transposed": "gather"},
                     "convtranspose1d_upsample_leaky": {"g0.form": "direct"}}
CONVND_MULTI_AXIS: list[tuple[str, dict[str, str]]] = [
    ("convtranspose2d_grouped_functional", {"g0.form": "direct"}),
    ("grouped_conv1d_gate", {"g0.SPLIT_K": "2"}),
    ("grouped_conv1d_gate", {"g0.reduction": "taps"}),
    ("conv2d_half_grouped", {"g0.reduction": "taps", "g0.layout": "channels_last"})]
# one axis (int64 only): the phase GEMM split-K, channels-last and flat, the tiled direct form
CONVND_ONE_AXIS: list[tuple[str, dict[str, str]]] = [
    ("convtranspose2d_grouped_functional", {"fusion": "none", "g0.SPLIT_K": "2"}),
    ("convtranspose1d_upsample_leaky", {"g0.layout": "channels_last"}),
    ("convtranspose1d_upsample_leaky", {"g0.reduction": "flat"}),
    ("depthwise_conv_silu", {"g0.direct": "tiled"})]


def _run(jobs: list[dict[str, Any]]) -> None:
    results = run_in_subprocess(jobs)
    bad = [(r["id"], r["error"][-600:]) for r in results if not r["ok"]]
    assert not bad, bad


def test_folded_grids_correct_in_the_interpreter(synth: OfflineSynthesizer) -> None:
    """Axis limit 1: every grid of two or three axes folds into axis 0 and the kernels
    unfold it; the extra shape sets (other batch sizes) run the same launchers."""
    jobs = []
    # split-K: a third axis (K slices), also on a product without a batch axis
    cases: list[tuple[str, dict[str, str]]] = [(name, CONVND_FOLD_FORMS.get(name, {})) for name in MULTI_AXIS]
    cases += [("matmul_4d", {"g0.SPLIT_K": "2"}), ("mm_plain", {"g0.SPLIT_K": "4"}), *CONVND_MULTI_AXIS]
    for k, (name, genome) in enumerate(cases):
        source, full, fallback = lower_example(synth, name, genome)
        assert not fallback and source.count(LIMIT_LINE) == 1, name
        assert all(full.get(key) == value for key, value in genome.items()), (name, genome, full)
        forced = source.replace(LIMIT_LINE, "_GRID_AXIS_LIMIT = 1")
        jobs.append({"id": f"{name}-{k}", "spec_source": example_source(name), "candidate_source": forced,
                     "seeds": [3]})
    _run(jobs)


@pytest.fixture(scope="module")
def triton_synth() -> OfflineSynthesizer:
    """Every convolution starts in Triton, also in a model of several (where the seed policy
    would start them in the library): the int64 cases test our kernels."""
    return OfflineSynthesizer(policy=ImplPolicy(library_when_several=frozenset()))


def test_int64_offsets_correct_in_the_interpreter(triton_synth: OfflineSynthesizer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Threshold 0: every kernel computes its offsets in int64; persistent and split forms
    (loops over int64 tiles, a second grid axis) too."""
    synth = triton_synth
    monkeypatch.setattr(grid_module, "INT64_NUMEL", 0)
    cases: list[tuple[str, dict[str, str]]] = [(name, {}) for name in MULTI_AXIS + ONE_AXIS]
    cases += [("relu_scale_add", {"g0.programs": "128"}), ("layernorm", {"g0.programs": "128"}),
              ("softmax_rows", {"g0.strategy": "split"}), ("row_sum", {"g0.strategy": "looped"}),
              ("matmul_4d", {"g0.SPLIT_K": "2"}), ("mm_plain", {"g0.SPLIT_K": "2"}),
              ("row_sum", {"g0.strategy": "split"}), *CONVND_FOLD_FORMS.items(), *CONVND_MULTI_AXIS,
              *CONVND_ONE_AXIS]
    jobs = []
    for k, (name, genome) in enumerate(cases):
        source, full, fallback = lower_example(synth, name, genome)
        assert not fallback and ".to(tl.int64)" in source, name
        assert all(full.get(key) == value for key, value in genome.items()), (name, genome, full)
        jobs.append({"id": f"{name}-{k}", "spec_source": example_source(name), "candidate_source": source,
                     "seeds": [4]})
    _run(jobs)


def test_views_count_their_base(synth: OfflineSynthesizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """glu_sigmoid reads the chunk halves of x in place (row pitch 2 * 160): its offsets
    reach x's element count, not the halves', so the threshold is x's (64 x 320)."""
    monkeypatch.setattr(grid_module, "INT64_NUMEL", 64 * 320)
    wide, _, _ = lower_example(synth, "glu_sigmoid", {})
    monkeypatch.setattr(grid_module, "INT64_NUMEL", 64 * 320 + 1)
    narrow, _, _ = lower_example(synth, "glu_sigmoid", {})
    assert WIDE_LINE in wide and ".to(tl.int64)" not in narrow
