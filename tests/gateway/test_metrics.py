"""The Prometheus endpoint of the gateway and the evaluator, scraped over HTTP."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Iterator
from contextlib import AsyncExitStack

import grpc
import pytest

from ke_evaluator import app as evaluator_app
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.metrics import record_llm_usage, start_metrics_server
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from tests.gateway.conftest import SPEC, TOKEN, settings_with
from tests.unit.fakes import FakeJudge

pytestmark = pytest.mark.integration


@pytest.fixture
def scrape() -> Iterator:
    port, stop = start_metrics_server("127.0.0.1", 0)

    def read() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:  # noqa: S310
            assert resp.status == 200
            return resp.read().decode()

    yield read
    stop()


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name{labels...}`` in the exposition text (0 when absent)."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:]+)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return 0.0


async def test_gateway_metrics(start_gateway, scrape) -> None:
    before = scrape()
    handle, _, _ = await start_gateway(settings_with(auth={"tokens": TOKEN}))
    gw = "kernelevolve.v1.Gateway"
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetSession(spb.SessionRef(session_id="x"))
        await stub.StartSession(spb.StartSessionRequest(spec=SPEC, budget=1), metadata=bearer_metadata(TOKEN))
    after = scrape()
    for code, method in (("UNAUTHENTICATED", "GetSession"), ("OK", "StartSession")):
        delta = (value(after, "kernelevolve_grpc_requests_total", service=gw, method=method, code=code)
                 - value(before, "kernelevolve_grpc_requests_total", service=gw, method=method, code=code))
        assert delta == 1, (code, method)
    started = "kernelevolve_sessions_started_total"
    assert value(after, started) - value(before, started) == 1
    assert value(after, "kernelevolve_grpc_request_seconds_count", service=gw, method="StartSession") >= 1
    assert value(after, "process_resident_memory_bytes") > 0
    record_llm_usage("test-model", 120, 30)
    assert value(scrape(), "kernelevolve_llm_tokens_total", model="test-model", kind="prompt") == 120


async def test_evaluator_metrics(scrape) -> None:
    before = scrape()
    async with AsyncExitStack() as stack:
        bus = MemoryBus()
        stack.push_async_callback(bus.close)
        settings = settings_with(evaluator={"hardware_kind": "cpu"})
        handle = await evaluator_app.start(settings, stack, bus=bus, store=MemoryStore(), judge=FakeJudge(), port=0)
        async with grpc.aio.insecure_channel(handle.target) as channel:
            stub = sgrpc.EvaluatorStub(channel)
            await asyncio.gather(*(stub.Evaluate(spb.EvaluateRequest(spec=SPEC, candidate_source=src,
                                                                     candidate_id=f"c{i}"))
                                   for i, src in enumerate(["# block=256\nOK\n", "# block=64\nBAD\n",
                                                            "# block=512\nOK\n"])))
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("kernelevolve_evaluations_total", hardware="cpu", verdict="correct") == 2
    assert delta("kernelevolve_evaluations_total", hardware="cpu", verdict="incorrect") == 1
    assert delta("kernelevolve_evaluation_seconds_count", hardware="cpu") == 3
    assert delta("kernelevolve_grpc_requests_total", service="kernelevolve.v1.Evaluator", method="Evaluate",
                 code="OK") == 3
