"""Who gets in: bearer tokens, TLS, rate limits, size limits and deadlines on a real
gateway gRPC server (loopback, port 0)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ke_cli.client import AuthenticationError, KernelEvolveClient, RateLimitedError
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from tests.gateway.conftest import OTHER_TOKEN, SPEC, TOKEN, make_self_signed, settings_with

pytestmark = pytest.mark.integration

AUTH = {"auth": {"tokens": f"{TOKEN},{OTHER_TOKEN}"}}


async def _code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code()


async def test_calls_without_or_with_a_wrong_token_are_refused(start_gateway, caplog) -> None:
    handle, _, _ = await start_gateway(settings_with(**AUTH))
    caplog.set_level(logging.WARNING, logger="kernelevolve.grpc_guard")
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        ref = spb.SessionRef(session_id="nope")
        assert await _code_of(stub.GetSession(ref)) == grpc.StatusCode.UNAUTHENTICATED
        assert await _code_of(stub.GetSession(ref, metadata=bearer_metadata("wrong-token"))) \
            == grpc.StatusCode.UNAUTHENTICATED
        assert await _code_of(stub.GetSession(ref, metadata=(("authorization", TOKEN),))) \
            == grpc.StatusCode.UNAUTHENTICATED  # no "Bearer " scheme
        # The stream is refused before a single event is sent.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in stub.WatchSession(spb.WatchSessionRequest(session_id="nope")):
                pass
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # Either accepted token passes the guard (and then the session is simply unknown).
        for token in (TOKEN, OTHER_TOKEN):
            assert await _code_of(stub.GetSession(ref, metadata=bearer_metadata(token))) \
                == grpc.StatusCode.NOT_FOUND
        # Kubernetes' gRPC probes send no credentials: health stays open.
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    refused = [r for r in caplog.records if r.getMessage() == "unauthenticated call refused"]
    assert len(refused) == 4
    assert {r.credentials for r in refused} == {"missing", "wrong"}  # type: ignore[attr-defined]
    assert all(r.method == "/kernelevolve.v1.Gateway/GetSession" or r.method.endswith("WatchSession")
               for r in refused)  # type: ignore[attr-defined]
    for r in refused:  # the attempt is logged, the presented token never is
        text = repr(r.__dict__)
        assert "wrong-token" not in text and TOKEN not in text


async def test_client_sends_its_token(start_gateway) -> None:
    handle, _, _ = await start_gateway(settings_with(**AUTH))
    async with KernelEvolveClient(handle.target) as anonymous:
        with pytest.raises(AuthenticationError):
            await anonymous.start_session(SPEC, budget=1)
    async with KernelEvolveClient(handle.target, token=TOKEN) as client:
        session = await client.start_session(SPEC, budget=1)
        assert (await client.get_session(session.session_id)).session_id == session.session_id


async def test_tls_with_a_self_signed_certificate(start_gateway, tmp_path: Path) -> None:
    cert, key = make_self_signed(tmp_path)
    settings = settings_with(**AUTH, gateway={"tls_cert_file": str(cert), "tls_key_file": str(key)})
    handle, _, _ = await start_gateway(settings)
    async with KernelEvolveClient(handle.target, token=TOKEN, tls=True, ca_cert=cert.read_bytes()) as client:
        session = await client.start_session(SPEC, budget=1)
        assert session.session_id
    # A plaintext client cannot talk to the TLS port at all.
    async with grpc.aio.insecure_channel(handle.target) as channel:
        code = await _code_of(sgrpc.GatewayStub(channel).GetSession(
            spb.SessionRef(session_id="x"), metadata=bearer_metadata(TOKEN), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE
    # Nor can a TLS client that does not trust the certificate.
    (tmp_path / "other").mkdir()
    other_cert, _ = make_self_signed(tmp_path / "other")
    async with grpc.aio.secure_channel(handle.target, grpc.ssl_channel_credentials(other_cert.read_bytes())) as ch:
        code = await _code_of(sgrpc.GatewayStub(ch).GetSession(
            spb.SessionRef(session_id="x"), metadata=bearer_metadata(TOKEN), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE


async def test_rate_limit_per_client(start_gateway) -> None:
    # 3 calls at once, then 0.2 per second: the 4th call within a second is refused.
    handle, _, _ = await start_gateway(settings_with(**AUTH, gateway={"rate_per_s": 0.2, "rate_burst": 3}))
    ref = spb.SessionRef(session_id="nope")
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        first = bearer_metadata(TOKEN)
        codes = [await _code_of(stub.GetSession(ref, metadata=first)) for _ in range(4)]
        assert codes == [grpc.StatusCode.NOT_FOUND] * 3 + [grpc.StatusCode.RESOURCE_EXHAUSTED]
        # Another client (another token) has its own bucket.
        assert await _code_of(stub.GetSession(ref, metadata=bearer_metadata(OTHER_TOKEN))) \
            == grpc.StatusCode.NOT_FOUND
        # Streams count too.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in stub.WatchSession(spb.WatchSessionRequest(session_id="nope"), metadata=first):
                pass
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_oversized_request_is_refused(start_gateway) -> None:
    handle, _, _ = await start_gateway(settings_with(grpc={"max_message_bytes": 64 * 1024}))
    big = spb.StartSessionRequest(spec=SPEC)
    big.spec.source = SPEC.source + "#" + "x" * (128 * 1024) + "\n"
    big.spec.sha256 = ""
    async with grpc.aio.insecure_channel(handle.target) as channel:
        code = await _code_of(sgrpc.GatewayStub(channel).StartSession(big))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_deadline_is_honoured(start_gateway) -> None:
    # The evaluator takes 30 s to validate; the caller gives the call 1.5 s.
    handle, _, validator = await start_gateway(settings_with(), delay_s=30.0)
    async with grpc.aio.insecure_channel(handle.target) as channel:
        code = await _code_of(sgrpc.GatewayStub(channel).StartSession(spb.StartSessionRequest(spec=SPEC),
                                                                       timeout=1.5))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    # Validation was handed what was left of the deadline, not its own 240 s.
    assert validator.timeouts and validator.timeouts[0] is not None and validator.timeouts[0] <= 1.5


async def test_client_waits_out_the_rate_limit(start_gateway) -> None:
    """The client retries a rate-limited call after a pause: an export of many candidates
    finishes within the limit instead of failing half-way."""
    handle, _, _ = await start_gateway(settings_with(**AUTH, gateway={"rate_per_s": 10, "rate_burst": 2}))
    async with KernelEvolveClient(handle.target, token=TOKEN) as client:
        session = await client.start_session(SPEC, budget=1)
        started = time.monotonic()
        for _ in range(6):  # 5 calls after the burst's first: ~0.1 s each at 10/s
            assert (await client.get_session(session.session_id)).session_id == session.session_id
        assert time.monotonic() - started >= 0.3
    async with KernelEvolveClient(handle.target, token=TOKEN, rate_limit_retries=0) as impatient:
        with pytest.raises(RateLimitedError):
            for _ in range(5):
                await impatient.get_session(session.session_id)
