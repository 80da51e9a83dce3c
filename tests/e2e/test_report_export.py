"""A real CPU session through the Python API, then what a user does with it: look at the report
in a browser (headless Chromium; a small run folder's report is rendered in the default
run by test_report_browser.py), export the kernel and run the export's own tests (custom op
under torch.compile), and the remaining commands with --json.

The screenshot of the rendered report is saved under ``test-artifacts/`` (or
``$KE_TEST_ARTIFACTS``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO_ROOT
from tests.e2e.report_browser import check_report, chromium

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLI = [sys.executable, "-m", "ke_cli.main"]
ARTIFACTS = Path(os.environ.get("KE_TEST_ARTIFACTS") or REPO_ROOT / "test-artifacts")


def _env() -> dict[str, str]:
    return dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
                TRITON_INTERPRET="1")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> object:
    """One CPU session (softmax_rows: two shape sets), run with the documented Python API."""
    import kernelevolve

    os.environ.setdefault("KE_KNOWLEDGE_EMBEDDER", "hash")
    out = tmp_path_factory.mktemp("session") / "run"
    result = kernelevolve.optimize(str(EXAMPLES / "softmax_rows.py"), budget=3, out=out, hardware="cpu")
    return result


def test_python_api_result(session: object) -> None:
    r = session
    assert r.ok and r.verdict == "correct" and r.speedup > 0  # type: ignore[attr-defined]
    assert r.status == "completed" and r.run_dir.is_dir() and r.interpreted  # type: ignore[attr-defined]
    assert "class ModelNew" in r.best_source  # type: ignore[attr-defined]
    assert r.report_path == r.run_dir / "report.html" and r.report_path.is_file()  # type: ignore[attr-defined]


def test_python_api_evaluate(session: object) -> None:
    import kernelevolve

    verdict = kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", session.run_dir / "best_kernel.py",  # type: ignore[attr-defined]
                                    trials=1)
    assert verdict.status == "correct" and verdict.is_correct
    bad = session.best_source.replace("tl.exp(", "tl.exp(0.5 * ")  # type: ignore[attr-defined]
    assert bad != session.best_source  # type: ignore[attr-defined]
    assert kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", bad, trials=1).status != "correct"


def test_report_renders_in_chromium(session: object, tmp_path: Path) -> None:
    chromium()
    check_report(session.run_dir, tmp_path / "profile", screenshots=ARTIFACTS)  # type: ignore[attr-defined]


def test_report_command_json(session: object, tmp_path: Path) -> None:
    run_dir: Path = session.run_dir  # type: ignore[attr-defined]
    proc = subprocess.run([*CLI, "report", str(run_dir), "--out", str(tmp_path / "r.html"), "--json"],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["report"] == str(tmp_path / "r.html") and out["best"] == session.best_candidate_id  # type: ignore[attr-defined]
    missing = subprocess.run([*CLI, "report", "no-such-session", "--json"], capture_output=True, text=True,
                             env=_env(), timeout=120, cwd=tmp_path)
    assert missing.returncode == 2 and "neither a run folder" in missing.stderr


@pytest.mark.parametrize("fmt", ["torch-library", "module"])
def test_export_works_and_its_tests_pass(session: object, tmp_path: Path, fmt: str) -> None:
    run_dir: Path = session.run_dir  # type: ignore[attr-defined]
    out = tmp_path / fmt
    proc = subprocess.run([*CLI, "export", str(run_dir), "--as", fmt, "--name", "ke_test::softmax",
                           "--out", str(out), "--json"], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["candidate_id"] == session.best_candidate_id and info["op_name"] == "ke_test::softmax"  # type: ignore[attr-defined]
    assert [s["args"][0]["shape"] for s in info["verified_shapes"]] == [[128, 384], [9, 1000]]
    assert ("op.py" in info["files"]) == (fmt == "torch-library")
    # The export's own tests, as a user runs them: vs the reference on fresh inputs, shape
    # refusal, and (torch-library) opcheck + torch.compile(fullgraph=True) with inductor on CPU.
    backend = "inductor" if shutil.which("g++") or shutil.which("c++") else "aot_eager"
    env = dict(_env(), KE_EXPORT_COMPILE_BACKEND=backend)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                            str(out / "test_export.py")], capture_output=True, text=True, env=env,
                           cwd=out, timeout=600)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    expected = "5 passed" if fmt == "torch-library" else "3 passed, 2 skipped"
    assert expected in tests.stdout, tests.stdout[-2000:]


def test_exported_op_refuses_unverified_shapes_in_compiled_code(session: object, tmp_path: Path) -> None:
    run_dir: Path = session.run_dir  # type: ignore[attr-defined]
    out = tmp_path / "op"
    subprocess.run([*CLI, "export", str(run_dir), "--out", str(out), "--json"], check=True,
                   capture_output=True, env=_env(), timeout=300)
    code = f"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("exported_op", {str(out / "op.py")!r})
op = importlib.util.module_from_spec(spec); spec.loader.exec_module(op)
f = torch.compile(lambda x: torch.ops.kernelevolve.softmax_rows(x) * 2, fullgraph=True, backend="aot_eager")
x = torch.randn(9, 1000)
torch.testing.assert_close(f(x), torch.softmax(x, -1) * 2)
try:
    f(torch.randn(10, 1000))
except Exception as exc:
    assert "verified only on" in str(exc), exc
    print("REFUSED")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "REFUSED" in proc.stdout


def test_every_command_has_json(tmp_path: Path) -> None:
    for cmd in (["optimize"], ["eval"], ["report"], ["export"], ["config", "show"]):
        helptext = subprocess.run([*CLI, *cmd, "--help"], capture_output=True, text=True, env=_env()).stdout
        assert "--json" in helptext, cmd
    proc = subprocess.run([*CLI, "config", "show", "--json"], capture_output=True, text=True,
                          env=dict(_env(), KE_STORE_SECRET_KEY="hunter2"), timeout=60)
    assert proc.returncode == 0 and "hunter2" not in proc.stdout
    assert json.loads(proc.stdout)["store"]["secret_key"] == "****"
