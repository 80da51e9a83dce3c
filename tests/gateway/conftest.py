"""A real gateway gRPC server on loopback over the in-memory bus and store, with a
spec-validator double (the evaluator's ValidateSpec is tested in tests/evaluator)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from ke_gateway import app as gateway_app
from ke_gateway.validator import Validation
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import Settings, load_settings
from kernelevolve.runtime import ServiceHandle
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "second-token-fedcba9876543210"
SPEC = make_spec("toy", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


class RecordingValidator:
    """Accepts every spec after ``delay_s``; remembers the time limit it was given."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.timeouts: list[float | None] = []

    async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
        self.timeouts.append(timeout_s)
        await asyncio.sleep(self.delay_s)
        return Validation(True)


GatewayFactory = Callable[..., Awaitable[tuple[ServiceHandle, MemoryBus, RecordingValidator]]]


def settings_with(**sections: dict[str, Any]) -> Settings:
    return load_settings(env={}, overrides=sections)


@pytest.fixture
async def start_gateway() -> AsyncIterator[GatewayFactory]:
    async with AsyncExitStack() as stack:

        async def start(settings: Settings, delay_s: float = 0.0):
            bus, validator = MemoryBus(), RecordingValidator(delay_s)
            stack.push_async_callback(bus.close)
            handle = await gateway_app.start(settings, stack, bus=bus, store=MemoryStore(), validator=validator,
                                             port=0, default_hardware="cpu")
            return handle, bus, validator

        yield start


def make_self_signed(folder: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1/localhost, made with the openssl CLI."""
    cert, key = folder / "tls.crt", folder / "tls.key"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("the openssl command is not installed")
    return cert, key
