"""Fixtures shared by every test folder: real local servers started and stopped by handle."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Triton kernels run in the interpreter on CPU; must be set before anything imports triton.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples" / "ops"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    """A real nats-server with JetStream on a free loopback port; yields its URL."""
    from kernelevolve.bus.nats_server import NatsServer

    server = NatsServer(tmp_path / "nats").start()
    try:
        yield server.url
    finally:
        server.stop()
