"""bench/cuda_graph_overhead.py on CPU: both candidates of a whole model (per-kernel and
CUDA-graph replay) are lowered and match the reference; nothing is timed without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_whole_model_with_and_without_the_graph_matches_the_reference(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "cuda_graph_overhead.py", "--specs", "model_mlp_layer_list,relu_scale_add",
                           "--out", str(tmp_path)], cwd=REPO_ROOT / "bench", capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["spec"]: r for r in json.loads((tmp_path / "cuda_graph_overhead.json").read_text())["rows"]}
    whole = rows["model_mlp_layer_list"]
    assert whole["kernels"] >= 3 and whole["timed"] is False
    assert whole["graph_off_max_abs_error"] < 1e-4 and whole["graph_on_max_abs_error"] < 1e-4
    assert "not offered" in rows["relu_scale_add"]["note"]  # one kernel: no graph to replay
