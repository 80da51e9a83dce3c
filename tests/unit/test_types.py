"""Static checks over every package of the project, with the tools of the dev extra:
mypy over libs/, services/ and cli/, ruff over those and the tests and benchmarks. A
missing tool fails the check: a check that skips itself checks nothing."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

CHECKED = ["libs", "services", "cli"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, capture_output=True, text=True)


def test_mypy_clean() -> None:
    proc = _run("mypy", *CHECKED)
    assert "No module named mypy" not in proc.stderr, "mypy belongs to the dev extra"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_clean() -> None:
    proc = _run("ruff", "check", *CHECKED, "tests", "bench")
    assert "No module named ruff" not in proc.stderr, "ruff belongs to the dev extra"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
