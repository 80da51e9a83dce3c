"""The ``kernelevolve`` command as a user runs it: a subprocess, real everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "ke_cli.main"]


def _run(args: list[str], cwd: Path, timeout: float = 420, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2", **env_extra)
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_optimize_json_writes_run_folder(tmp_path: Path) -> None:
    proc = _run(["optimize", str(EXAMPLES / "gelu_tanh_chain.py"), "--budget", "2", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)  # one JSON object, nothing else on stdout
    assert out["status"] == "completed" and out["evaluated"] == 2
    best = out["best"]
    assert best["status"] == "correct" and best["speedup"] > 0
    run_dir = tmp_path / out["run_dir"]
    assert run_dir == tmp_path / "runs" / out["session_id"]  # default location
    assert Path(tmp_path / best["path"]).is_file()
    assert len(list((run_dir / "candidates").glob("*.py"))) == 2
    assert len(list((run_dir / "reports").glob("*.json"))) == 2
    assert "say nothing about GPU speed" in out["note"]


def test_optimize_progress_and_out(tmp_path: Path) -> None:
    proc = _run(["optimize", str(EXAMPLES / "relu_scale_add.py"), "--budget", "1", "--out", "myrun",
                 "--precision", "strict"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "generated" in proc.stdout and "evaluated" in proc.stdout
    assert "Best: r1-1" in proc.stdout and "say nothing about GPU speed" in proc.stdout
    # the figure is the fresh-worker re-time, under the contract asked for
    assert "(fresh-worker re-time; first evaluation" in proc.stdout and "precision strict)" in proc.stdout
    assert "Precision: strict (IEEE float32 everywhere" in proc.stdout
    summary = json.loads((tmp_path / "myrun" / "summary.json").read_text())
    assert summary["precision"] == "strict" and summary["best_speedup_source"] == "fresh-worker re-time"
    assert (tmp_path / "myrun" / "best_kernel.py").is_file()
    again = _run(["optimize", str(EXAMPLES / "relu_scale_add.py"), "--budget", "1", "--out", "myrun"], tmp_path)
    assert again.returncode == 2 and "not empty" in again.stderr  # never overwrites a run


BAD_SPECS = {
    "syntax": ("def broken(:\n", "does not parse"),
    "no_model": ("import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
                 "lacks Model"),
    "raises": ((EXAMPLES / "row_sum.py").read_text().replace(
        "return torch.sum(x, dim=-1, keepdim=True)", "raise RuntimeError('boom in reference')"), "boom in reference"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_exits_2_and_leaves_nothing(tmp_path: Path, case: str) -> None:
    source, message = BAD_SPECS[case]
    spec = tmp_path / f"{case}.py"
    spec.write_text(source)
    proc = _run(["optimize", str(spec), "--budget", "1", "--out", "out"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1  # one clear line
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "runs").exists()


def test_a_spec_whose_import_never_returns_exits_2_within_the_import_limit(tmp_path: Path) -> None:
    import time

    spec = tmp_path / "hangs.py"
    spec.write_text("import threading\nthreading.Event().wait()\n" + (EXAMPLES / "row_sum.py").read_text())
    t0 = time.monotonic()
    proc = _run(["optimize", str(spec), "--budget", "1", "--out", "out"], tmp_path, timeout=300,
                KE_EVALUATOR_SPEC_IMPORT_TIMEOUT_S="5")
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr
    assert "import did not return within 5 s" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "out").exists()
    # Start-up, the import limit and the stop: well inside the 240 s validation may wait.
    assert took < 120.0, took


VIEW_ONLY = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
             "        return x.permute(1, 0)\n\n\ndef get_inputs():\n    return [torch.randn(7, 33)]\n\n\n"
             "def get_init_inputs():\n    return []\n")


@pytest.mark.parametrize("command", ["optimize", "eval"])
def test_a_spec_that_only_views_its_inputs_has_nothing_to_compute(tmp_path: Path, command: str) -> None:
    """Neither the user's error (2) nor a limit of ours (3): exit 1 with one line, no run folder."""
    spec = tmp_path / "view.py"
    spec.write_text(VIEW_ONLY)
    args = ["--budget", "1", "--out", "out"] if command == "optimize" else [str(EXAMPLES / "relu_scale_add.py")]
    proc = _run([command, str(spec), *args], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "nothing to compute: the reference only reshapes its inputs" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1  # one clear line
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_missing_spec_file(tmp_path: Path) -> None:
    proc = _run(["optimize", "nope.py"], tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_eval_judges_one_candidate(tmp_path: Path) -> None:
    good = _run(["optimize", str(EXAMPLES / "relu_scale_add.py"), "--budget", "1", "--out", "r", "--json"],
                tmp_path)
    assert good.returncode == 0, good.stderr
    cand = tmp_path / "r" / "best_kernel.py"
    proc = _run(["eval", str(EXAMPLES / "relu_scale_add.py"), str(cand), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "correct" and verdict["reason"]
    assert verdict["precision"]["name"] == "default" and verdict["precision"]["flags"]["cudnn.allow_tf32"] == "True"
    assert verdict["candidate_timing"]["median_ms"] > 0 and verdict["baseline_timing"]["median_ms"] > 0
    broken = Path(__file__).parent / "candidates" / "relu_scale_add_wrong_scale.py"
    proc = _run(["eval", str(EXAMPLES / "relu_scale_add.py"), str(broken), "--json"], tmp_path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["status"] == "incorrect"


def test_eval_screens_one_candidate_when_asked(tmp_path: Path) -> None:
    cand = Path(__file__).parents[1] / "evaluator" / "candidates" / "ok_relu_scale_add.py"
    proc = _run(["eval", str(EXAMPLES / "relu_scale_add.py"), str(cand), "--tier", "screen", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "correct" and verdict["tier"] == "screen"
    assert verdict["reason"].startswith("screened (provisional") and verdict["correctness"]["trials"] == 1
    proc = _run(["eval", str(EXAMPLES / "relu_scale_add.py"), str(cand), "--tier", "screen"], tmp_path)
    assert proc.returncode == 0 and "correct (screened: provisional)" in proc.stdout, proc.stderr


# The two specs every new user's first try looked like: each gets a correct Triton kernel.
FIRST_TRY_SPECS = {
    "super_named": ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                    "        super(Model, self).__init__()\n\n    def forward(self, x):\n"
                    "        return torch.relu(x) * 2.0\n"),
    "no_init": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
                "    def forward(self, x):\n        return torch.relu(x) * 2.0\n"),
}


@pytest.mark.parametrize("style", sorted(FIRST_TRY_SPECS))
def test_specs_in_other_peoples_style_get_a_kernel(tmp_path: Path, style: str) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(FIRST_TRY_SPECS[style] + "\n\ndef get_inputs():\n    return [torch.randn(33, 65)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    proc = _run(["optimize", str(spec), "--budget", "2", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["best"] is not None and out["best"]["status"] == "correct", out
    assert "@triton.jit" in (tmp_path / out["best"]["path"]).read_text()


def test_a_reference_past_our_memory_limit_exits_3_not_2(tmp_path: Path) -> None:
    """A valid spec whose reference needs 8 GiB under a 6 GiB worker cap: a resource
    limit of ours (exit 3, naming the limit), through the gateway and the evaluator's
    ValidateSpec as much as through ``eval``'s own judge."""
    from tests.evaluator.test_resource_limits import HUGE_REFERENCE

    spec = tmp_path / "huge.py"
    spec.write_text(HUGE_REFERENCE)
    cap = {"KE_EVALUATOR_SANDBOX_MEMORY_LIMIT_BYTES": str(6 * 2**30)}
    proc = _run(["optimize", str(spec), "--budget", "1", "--out", "r"], tmp_path, **cap)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "resource limit" in proc.stderr and "the limit is 6 GiB" in proc.stderr
    assert not (tmp_path / "r").exists()  # nothing half-written, as for a bad spec
    cand = Path(__file__).parent.parent / "evaluator" / "candidates" / "ok_relu_scale_add.py"
    proc = _run(["eval", str(spec), str(cand)], tmp_path, **cap)
    assert proc.returncode == 3 and "resource limit" in proc.stderr, proc.stderr[-2000:]
