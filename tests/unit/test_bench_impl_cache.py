"""bench/impl_cache.py on CPU: both candidates of every conv / matmul with an ``impl`` knob
(the node in Triton, the node in the library) are lowered and match the reference; without
CUDA nothing is timed and no cache entry is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def test_every_heavy_node_of_a_model_is_lowered_both_ways(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "impl_cache.py", "--specs", "model_cnn_head", "--out", str(tmp_path)],
                          cwd=REPO_ROOT / "bench", capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "impl_cache_run.json").read_text())["rows"]
    assert [r["node"] for r in rows] == ["impl.c1", "impl.c2", "impl.fc"]
    for row in rows:
        assert row["triton_max_abs_error"] < 1e-4 and row["library_max_abs_error"] < 1e-4, row
        assert "choice" not in row
    assert not (tmp_path / "impl_cache.json").exists()
