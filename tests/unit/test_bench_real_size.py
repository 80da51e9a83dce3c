"""bench/real_size_verdicts.py: the spec lists it takes, how it counts kernels, and a CPU
smoke run of the whole script (lowering, the real judge, the JSON written per spec)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT


def test_large_specs_stay_out_of_every_other_benchmarks_all() -> None:
    common = load_bench_script("common")
    large = common.large_names("large")
    assert len(large) >= 14 and large == sorted(p.stem for p in (REPO_ROOT / "examples" / "large").glob("*.py"))
    assert not set(large) & set(common.example_names("all"))
    assert common.large_names("large+all") == large + common.example_names("all")
    assert common.large_names("layernorm,softmax_wide") == ["layernorm", "softmax_wide"]


def test_spec_source_takes_large_specs_as_written_and_examples_at_gpu_size() -> None:
    common = load_bench_script("common")
    source, large = common.spec_source("rmsnorm_gate")
    assert large and source == (REPO_ROOT / "examples" / "large" / "rmsnorm_gate.py").read_text()
    source, large = common.spec_source("layernorm")
    assert not large and source.endswith(common.GPU_SUFFIX)


def test_jit_kernels_counts_distinct_decorated_functions() -> None:
    bench = load_bench_script("real_size_verdicts")
    src = ("@triton.jit\ndef _a(x):\n    pass\n\n@triton.autotune(configs=[])\n@triton.jit\ndef _b(x):\n    pass\n"
           "@triton.jit(do_not_specialize=['n'])\n@some.other\ndef _c(n):\n    pass\n\n@triton.jit\ndef _a(x):\n"
           "    pass\n# @triton.jit is mentioned in a comment\ndef plain():\n    pass\n")
    assert bench.jit_kernels(src) == 3


@pytest.mark.slow
def test_cpu_smoke_run_writes_a_verdict_per_spec(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "real_size_verdicts.py", "--device", "cpu", "--specs", "layernorm",
                           "--parallel", "1", "--jobs", "1", "--trials", "3", "--out", str(tmp_path)],
                          cwd=REPO_ROOT / "bench", capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "real_size_verdicts.json").read_text())
    assert result["specs"] == 1 and result["statuses"] == {"correct": 1} and "python" in result["fingerprint"]
    row = result["rows"][0]
    assert row["spec"] == "layernorm" and row["large"] is False
    assert row["jit_kernels"] >= 1 and row["lowering_s"] > 0 and 0 < row["input_bytes"] < 2**20
    assert row["compile_s"] is not None and row["verdict_at_s"] >= row["judge_s"] > 0
    assert row["device_used_peak_gib"] is None  # no GPU: nothing sampled
    assert result["first_verdict_s"] == row["verdict_at_s"]
