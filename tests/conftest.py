"""Fixtures shared by every test folder: real local servers started and stopped by handle."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch  # imports no triton; asked only whether a GPU is there

# Triton kernels run in the interpreter on CPU; must be set before anything imports triton.
# On a GPU host the tests that need CUDA run on it (with the interpreter set here, an
# interpreted launch reads device pointers and fails).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples" / "ops"


@pytest.fixture(autouse=True)
def _private_knowledge_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user-level knowledge folder (under $XDG_DATA_HOME) of every test is its own, so
    no test reads or writes the real user's knowledge; subprocesses inherit it."""
    data = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    return data / "kernelevolve" / "knowledge"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    """A real nats-server with JetStream on a free loopback port; yields its URL."""
    from kernelevolve.bus.nats_server import NatsServer

    server = NatsServer(tmp_path / "nats").start()
    try:
        yield server.url
    finally:
        server.stop()
