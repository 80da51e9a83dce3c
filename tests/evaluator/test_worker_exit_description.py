"""What a verdict says when a worker's pipe closes: the worker's own log goes with it,
also when the process outlives its pipe (seen on an H100 with a 1.64e9-element
convolution, where the verdict had said only "pipe closed but the process is still running")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ke_evaluator.judge.worker_pool import WorkerProcess


def _worker(tmp_path: Path, code: str, log: str) -> WorkerProcess:
    w = WorkerProcess.__new__(WorkerProcess)  # no real worker: only the description is under test
    w.log_path = str(tmp_path / "worker.log")
    Path(w.log_path).write_text(log)
    w._log = open(w.log_path, "ab")  # noqa: SIM115 - closed by the test
    w.proc = subprocess.Popen([sys.executable, "-c", code])
    w.exit_wait_s = 0.5
    return w


@pytest.mark.parametrize(
    ("code", "expect"),
    [
        ("import time; time.sleep(30)", "pipe closed but the process is still running; log tail:"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "worker killed by SIGSEGV (segmentation fault)"),
        ("raise SystemExit(3)", "worker exited with code 3 without a result"),
    ],
)
def test_the_description_carries_the_workers_log_whether_or_not_it_has_exited(
    tmp_path: Path, code: str, expect: str
) -> None:
    w = _worker(tmp_path, code, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    try:
        desc = w._exit_description()
    finally:
        w.proc.kill()
        w.proc.wait()
        w._log.close()
    assert expect in desc
    assert "illegal memory access" in desc
