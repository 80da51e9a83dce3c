"""The bus every test in this folder runs against: the real JetStream adapter on a
nats-server of its own, and the in-memory double, so one suite holds both to one contract."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kernelevolve.bus.memory import MemoryBus
from kernelevolve.config import BusSettings


@pytest.fixture(params=["jetstream", "memory"])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[object]:
    if request.param == "memory":
        b: object = MemoryBus(redeliver_delay_s=0.01)
    else:
        from kernelevolve.bus.jetstream import JetStreamBus

        b = await JetStreamBus.connect(BusSettings(url=request.getfixturevalue("nats_server")))
    try:
        yield b
    finally:
        await b.close()  # type: ignore[attr-defined]
