"""A CPU-only user's deep CNN with its sizes inline (no constants, no get_cpu_inputs()): the
CLI judges it at smaller batch and image sizes with the same model, and says so in the
JSON, the summary and the report; one whose head depends on the image size cannot be
shrunk without changing the model: exit 3, a limit of ours, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_spec_shrink import FLATTENED, GLOBAL_AVERAGE

pytestmark = pytest.mark.e2e


def _optimize(tmp_path: Path, source: str, *extra: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "deep_cnn.py"
    spec.write_text(source)
    env = dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
               KE_EVALUATOR_HARDWARE_KIND="cpu")
    return subprocess.run([sys.executable, "-m", "ke_cli.main", "optimize", str(spec), "--out", str(tmp_path / "run"),
                           *extra], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_a_cnn_whose_head_reads_the_image_size_exits_3_with_one_line(tmp_path: Path) -> None:
    proc = _optimize(tmp_path, FLATTENED, "--budget", "1")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "evaluator.interpreter_max_flops" in proc.stderr, proc.stderr
    assert "same ops, same parameter shapes" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # a session on a 50-layer CNN in the interpreter
def test_a_deep_cnn_is_judged_at_smaller_shapes_and_says_which(tmp_path: Path) -> None:
    proc = _optimize(tmp_path, GLOBAL_AVERAGE, "--budget", "1", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    shapes = json.loads(proc.stdout)["judged_shapes"]
    assert shapes["method"] == "inputs" and shapes["shrunk"]
    assert [i["shape"] for i in shapes["original_inputs"]] == [[12, 3, 160, 160], [12]]
    assert "re-traced: same ops, same parameter shapes" in shapes["description"]
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text())["judged_shapes"]["description"] == shapes["description"]
    assert "Shrunk shapes." in (run / "report.html").read_text()
    judged = [i["shape"] for i in shapes["inputs"]]
    reports = [json.loads(p.read_text()) for p in (run / "reports").glob("*.json")]
    assert [r["evidence"]["input_shapes"] for r in reports if r["status"] == "correct"] in ([], [judged])
