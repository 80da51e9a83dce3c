"""A real-size spec (two 65,536 x 16,384 inputs, 8 GiB) optimised on a machine without a
GPU: the CLI says up front that it judges shrunk shapes, ends with a correct candidate,
and the summary, the JSON and the report name the shapes judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # about 2 min on 2 shared cores

SPEC = REPO_ROOT / "examples" / "large" / "rmsnorm_gate.py"


def test_real_size_rms_norm_is_judged_at_shrunk_shapes_on_cpu(tmp_path: Path) -> None:
    # The CPU path even where a GPU is visible: a GPU judges the spec at its own size.
    env = dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
               KE_EVALUATOR_HARDWARE_KIND="cpu")
    proc = subprocess.run([sys.executable, "-m", "ke_cli.main", "optimize", str(SPEC), "--budget", "2", "--json",
                           "--out", str(tmp_path / "run")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["best"]["status"] == "correct"
    shapes = out["judged_shapes"]
    assert shapes["shrunk"] and shapes["method"] == "constants"
    assert [i["shape"] for i in shapes["original_inputs"]] == [[65536, 16384], [65536, 16384]]
    assert shapes["input_bytes"] <= 4 * 2**20
    assert shapes["description"].startswith("judged at shrunk shapes: x [") and "instead of [65536, 16384]" in \
        shapes["description"]
    run = tmp_path / "run"
    assert json.loads((run / "judged_shapes.json").read_text())["description"] == shapes["description"]
    assert "Shrunk shapes." in (run / "report.html").read_text()
