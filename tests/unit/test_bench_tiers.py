"""bench/tier_verdicts.py: the medians it reports, and a CPU smoke run of the whole script
(lowering, the real judge, both tiers, the JSON written per spec)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT


def test_medians_per_tier_and_stage() -> None:
    bench = load_bench_script("tier_verdicts")
    rows = [{"seconds": s, "status": "correct", "stage_s": st} for s, st in
            [(1.0, {"screen": 0.5}), (3.0, {"screen": 0.7, "timing": 0.2}), (2.0, {"screen": 0.6})]]
    assert bench._medians(rows) == {"n": 3, "seconds": 2.0, "stage_s": {"screen": 0.6, "timing": 0.0},
                                    "statuses": ["correct"]}
    assert bench._medians([]) == {}


@pytest.mark.slow
def test_cpu_smoke_run_reports_both_tiers(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "tier_verdicts.py", "--device", "cpu", "--specs", "relu_scale_add",
                           "--screens", "2", "--fulls", "1", "--parallel", "1", "--trials", "3", "--batch", "1",
                           "--batch-tiers", "screen", "--out", str(tmp_path)],
                          cwd=REPO_ROOT / "bench", capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "tier_verdicts.json").read_text())
    assert [(r["label"], r["tier"], r["status"]) for r in result["rows"]] == [
        ("first-full", "full", "correct"), ("screen-0", "screen", "correct"), ("screen-1", "screen", "correct"),
        ("full-0", "full", "correct")]
    spec = result["specs"]["relu_scale_add"]
    assert spec["screen"]["n"] == 2 and "screen" in spec["screen"]["stage_s"]
    assert "correctness" in spec["full_warm"]["stage_s"] and "measure" in spec["first_full"]["stage_s"]
    assert all(r["reference_outputs"] == "cached" for r in result["rows"] if r["tier"] == "screen")
    assert result["batch_screen"]["verdicts"] == 1 and result["stream_screen_per_gpu_minute"] > 0
