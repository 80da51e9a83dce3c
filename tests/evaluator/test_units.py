"""Unit tests of the worker-side pieces that need no worker: tolerances, comparison,
timing statistics, environment scrubbing, roofline classification."""

from __future__ import annotations

import pytest
import torch

from ke_evaluator.judge import worker_environment
from ke_evaluator.worker import diagnosis, output_checks, timing, tolerance

TOLERANCES = [
    (torch.float32, 1e-4, 1e-4),
    (torch.float16, 1e-2, 1e-2),
    (torch.bfloat16, 1e-2, 1e-2),
    (torch.float64, 1e-7, 1e-7),
]


@pytest.mark.parametrize(("dtype", "atol", "rtol"), TOLERANCES, ids=[str(t[0]) for t in TOLERANCES])
def test_tolerance_table(dtype: torch.dtype, atol: float, rtol: float) -> None:
    assert tolerance.tolerance_for(dtype, None) == (atol, rtol)
    assert tolerance.tolerance_for(dtype, {"atol": 0.5}) == (0.5, rtol)


@pytest.mark.parametrize("shape", [(1,), (7, 3), (13, 257), (2, 3, 5, 7)], ids=str)
@pytest.mark.parametrize(("dtype", "atol", "rtol"), TOLERANCES, ids=[str(t[0]) for t in TOLERANCES])
def test_compare_values_respects_tolerance(shape: tuple[int, ...], dtype: torch.dtype, atol: float,
                                           rtol: float) -> None:
    torch.manual_seed(0)
    ref = torch.randn(shape).to(dtype)
    inside = (ref.double() + 0.5 * atol).to(dtype) if dtype == torch.float64 else ref.clone()
    assert tolerance.compare_values(inside, ref, None).ok
    outside = ref.clone()
    outside.view(-1)[-1] += 4 * (atol + rtol * float(ref.view(-1)[-1].abs())) + 0.05
    result = tolerance.compare_values(outside, ref, None)
    assert not result.ok and "mismatch" in result.reason


def test_nan_handling() -> None:
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert tolerance.compare_values(ref.clone(), ref, None).ok
    bad = torch.tensor([1.0, 2.0, float("nan")])
    assert "NaN" in tolerance.compare_values(bad, ref, None).reason


def test_structure_checks() -> None:
    x = torch.randn(4, 6)
    ref = torch.randn(4, 6)
    assert output_checks.check_structure(ref.clone(), ref, [x]) == ""
    assert "aliases input 0" in output_checks.check_structure(x.view(4, 6), ref, [x])
    assert "shape" in output_checks.check_structure(torch.randn(6, 4), ref, [x])
    assert "dtype" in output_checks.check_structure(torch.randn(4, 6).double(), ref, [x])
    assert "strides" in output_checks.check_structure(torch.randn(6, 4).t(), ref, [x])

    class Sub(torch.Tensor):
        pass

    assert "plain torch.Tensor" in output_checks.check_structure(ref.clone().as_subclass(Sub), ref, [x])
    assert "structure" in output_checks.check_structure((ref, ref), (ref,), [x])


def test_inputs_unchanged_detects_in_place_writes() -> None:
    x = torch.randn(3, 3)
    assert output_checks.inputs_unchanged([x.clone()], [x]) == ""
    y = x.clone()
    y[0, 0] += 1
    assert "modified in place" in output_checks.inputs_unchanged([x], [y])


def test_median_ci_and_summary() -> None:
    samples = [float(v) for v in range(1, 101)]
    lo, hi = timing.median_ci(samples)
    assert lo < 50.5 < hi and hi - lo < 25
    s = timing.summarize(samples)
    assert s["median_ms"] == 50.5 and s["trials"] == 100 and s["iqr_ms"] == pytest.approx(49.5)
    assert timing.ci_tight([10.0] * 20, 0.02)
    assert not timing.ci_tight([1.0, 10.0, 100.0, 5.0], 0.02)


def test_interleaved_timing_stops_early_when_tight() -> None:
    calls: list[str] = []
    policy = timing.TimingPolicy(min_trials=3, max_trials=50, ci_target=0.5, budget_s=10.0, warmup=1)
    base, cand = timing.interleaved(lambda i: calls.append("b"), lambda i: calls.append("c"), [[1], [2]],
                                    timing.Timer(torch.device("cpu")), policy)
    assert len(base) == len(cand) and 3 <= len(base) <= 50
    assert calls.count("b") == calls.count("c")


def test_child_environment_scrubs_secrets(tmp_path) -> None:  # noqa: ANN001
    parent = {"PATH": "/usr/bin", "OPENAI_API_KEY": "x", "AWS_REGION": "eu", "GITHUB_TOKEN": "t",
              "TRITON_CACHE_DIR": "c", "TRITON_API_KEY": "k", "HOME": "parent-home", "MY_PASSWORD": "p",
              "CUDA_VISIBLE_DEVICES": "3", "RANDOM_SETTING": "1", "LANG": "C.UTF-8"}
    env = worker_environment.child_environment(parent, scratch_dir=str(tmp_path), device="cpu",
                                               cuda_visible_devices=None, pythonpath="pkg")
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8" and env["TRITON_CACHE_DIR"] == "c"
    for gone in ("OPENAI_API_KEY", "AWS_REGION", "GITHUB_TOKEN", "TRITON_API_KEY", "MY_PASSWORD", "RANDOM_SETTING"):
        assert gone not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"].startswith(str(tmp_path))
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
    gpu = worker_environment.child_environment(parent, scratch_dir=str(tmp_path), device="cuda",
                                               cuda_visible_devices="1", pythonpath="pkg")
    assert gpu["CUDA_VISIBLE_DEVICES"] == "1" and "TRITON_INTERPRET" not in gpu


@pytest.mark.parametrize(
    ("flops", "nbytes", "ms", "device_name", "bound"),
    [
        (0.0, 1e9, 0.5, "NVIDIA H100 80GB HBM3", "memory"),
        (2 * 4096**3, 3 * 4096 * 4096 * 2, 0.2, "NVIDIA H100 80GB HBM3", "compute"),
        (0.0, 4096.0, 0.003, "NVIDIA H200", "latency"),
    ],
    ids=["pointwise", "gemm", "tiny"],
)
def test_roofline_classification(flops: float, nbytes: float, ms: float, device_name: str, bound: str) -> None:
    d = diagnosis.classify(bytes_moved=nbytes, flops=flops, median_ms=ms, device_type="cuda",
                           device_name=device_name, uses_tensor_cores=True)
    assert d["bound"] == bound
    assert d["achieved_gbps"] == pytest.approx(nbytes / (ms / 1e3) / 1e9)


def test_host_bound_call_is_latency_bound_and_rates_use_device_time() -> None:
    # 1 GB moved in 0.5 ms of device time, but the launcher needs 0.8 ms per call.
    d = diagnosis.classify(bytes_moved=1e9, flops=0.0, median_ms=0.8, device_type="cuda",
                           device_name="NVIDIA H100 80GB HBM3", uses_tensor_cores=False,
                           device_ms=0.5, host_ms=0.8)
    assert d["bound"] == "latency"
    assert d["achieved_gbps"] == pytest.approx(1e9 / 0.5e-3 / 1e9)
    assert any("launch-bound" in n for n in d["notes"])


def test_flop_counter_on_matmul() -> None:
    a = torch.randn(8, 16)
    b = torch.randn(16, 4)
    assert diagnosis.count_flops(lambda: a @ b) == 2 * 8 * 16 * 4


def test_heavy_ops_are_counted_once_per_conv_and_matmul() -> None:
    x, w, lin = torch.randn(2, 3, 9, 7), torch.randn(4, 3, 3, 3), torch.nn.Linear(5, 6)
    flops, heavy = diagnosis.count_work(lambda: lin(torch.nn.functional.conv2d(x, w)).sum() + (x @ x.mT).sum())
    assert flops > 0 and heavy == 3  # convolution, the linear's mm / addmm, the batched matmul
    assert diagnosis.library_share({"aten::convolution": 2, "aten::relu": 4, "aten::addmm": 1}, 5) == \
        {"library_calls": 3, "heavy_ops": 5}


F = torch.nn.functional
FLOP_CASES = {
    "mm_odd": lambda: torch.randn(33, 17) @ torch.randn(17, 9),
    "linear_3d_bias": lambda: F.linear(torch.randn(5, 7, 16), torch.randn(8, 16), torch.randn(8)),
    "conv2d_strided": lambda: F.conv2d(torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), stride=2, padding=1),
    "conv_transpose2d": lambda: F.conv_transpose2d(torch.randn(2, 3, 9, 9), torch.randn(3, 4, 3, 3)),
    "conv1d_grouped": lambda: F.conv1d(torch.randn(2, 4, 11), torch.randn(4, 2, 3), groups=2),
    "bmm": lambda: torch.bmm(torch.randn(3, 5, 6), torch.randn(3, 6, 7)),
    "einsum": lambda: torch.einsum("bij,bjk->bik", torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
    "pointwise_only": lambda: torch.relu(torch.randn(7, 3)) * 2,
}


@pytest.mark.parametrize("name", sorted(FLOP_CASES))
def test_flop_count_matches_torch_flop_counter_mode(name: str) -> None:
    """Our total comes from the same formulas as FlopCounterMode, without its Dynamo guard."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    ours = diagnosis.count_flops(FLOP_CASES[name])
    with FlopCounterMode(display=False) as counter:
        FLOP_CASES[name]()
    assert ours == counter.get_total_flops()


def test_diagnosis_start_up_does_not_import_dynamo() -> None:
    """The worker's first flop count and profile must not pull in Dynamo/Inductor (seconds of
    import in every worker's start-up): checked in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from ke_evaluator.worker import diagnosis\n"
            "a = torch.randn(8, 8)\n"
            "assert diagnosis.count_flops(lambda: a @ a) == 2 * 8 * 8 * 8\n"
            "frac, _, ops = diagnosis.library_time_fraction(lambda: a @ a, 'cpu', set())\n"
            "assert 'aten::mm' in ops, ops\n"
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_timing_rounds_see_new_values_in_the_same_buffers() -> None:
    sets = [[torch.randn(8)], [torch.randn(8)]]
    sources = [[t.clone() for t in s] for s in sets]
    seen: list[tuple[int, float]] = []

    def refresh(idx: int, k: int) -> None:
        sets[idx][0].copy_(sources[idx][0]).mul_(1.0 + (k + 1) * 2.0**-12)

    def fn(inputs: list[torch.Tensor]) -> None:
        seen.append((inputs[0].data_ptr(), float(inputs[0].sum())))

    policy = timing.TimingPolicy(min_trials=6, max_trials=6, warmup=0)
    timing.interleaved_many([fn, fn], sets, timing.Timer(torch.device("cpu")), policy, refresh=refresh)
    assert len(seen) == 12
    assert len({ptr for ptr, _ in seen}) == 2  # the same two buffers throughout
    per_round = [seen[i][1] for i in range(0, 12, 2)]
    assert len(set(per_round)) == 6  # every round had new values


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [((1.0, 1.1), (1.2, 1.3), "faster"), ((1.2, 1.3), (1.0, 1.1), "slower"), ((1.0, 1.25), (1.2, 1.3),
                                                                               "indistinguishable")],
    ids=["faster", "slower", "overlap"],
)
def test_compare_medians_by_confidence_interval(a: tuple[float, float], b: tuple[float, float],
                                                expected: str) -> None:
    ta = {"ci_low_ms": a[0], "ci_high_ms": a[1]}
    tb = {"ci_low_ms": b[0], "ci_high_ms": b[1]}
    assert timing.compare_medians(ta, tb) == expected


def test_input_alias_allowed_only_when_the_reference_aliases() -> None:
    x = torch.randn(4, 6)
    ref_in = x.clone()
    assert output_checks.aliases_any(ref_in.view(24), [ref_in])
    assert not output_checks.aliases_any(ref_in * 2, [ref_in])
    assert "aliases input" in output_checks.check_structure(x.view(4, 6), x.clone(), [x])
    assert output_checks.check_structure(x.view(4, 6), x.clone(), [x], allow_input_alias=True) == ""
