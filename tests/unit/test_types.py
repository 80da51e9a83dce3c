"""The orchestration layers are type-checked (mypy, from the dev extra)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("mypy")

CHECKED = [
    "libs/kernelevolve/bus",
    "libs/kernelevolve/store",
    "libs/kernelevolve/config.py",
    "libs/kernelevolve/errors.py",
    "libs/kernelevolve/spec.py",
    "libs/kernelevolve/artifacts.py",
    "libs/kernelevolve/runtime.py",
    "libs/kernelevolve/grpc_util.py",
    "libs/kernelevolve/report",
    "services/search/ke_search",
    "services/gateway/ke_gateway",
    "services/knowledge/ke_knowledge",
    "services/synthesizer/ke_synthesizer/service.py",
    "services/evaluator/ke_evaluator/service.py",
    "services/evaluator/ke_evaluator/convert.py",
    "cli/ke_cli",
]


def test_mypy_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", *CHECKED], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
