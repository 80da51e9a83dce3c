"""Every field of the gateway's requests is checked; a bad one gets INVALID_ARGUMENT with
a message naming it. Also: WatchSession resumes after a sequence number."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from ke_cli.client import KernelEvolveClient
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.subjects import Subjects
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from tests.gateway.conftest import SPEC, settings_with

pytestmark = pytest.mark.integration


def _start(**fields) -> spb.StartSessionRequest:
    req = spb.StartSessionRequest(spec=SPEC)
    if "spec_source" in fields:
        req.spec.sha256 = ""  # the digest is optional; a stale one is its own error
    for name, value in fields.items():
        if name.startswith("spec_"):
            setattr(req.spec, name[5:], value)
        else:
            setattr(req, name, value)
    return req


BAD_STARTS = [
    (spb.StartSessionRequest(), "spec is required"),
    (_start(spec_source="   "), "spec source is empty"),
    (_start(spec_source="def oops(:\n"), "does not parse"),
    (_start(spec_source="x = 1\n"), "Model"),
    (_start(spec_name="bad name!"), "spec name"),
    (_start(spec_sha256="abc"), "spec.sha256 must be"),
    (_start(spec_sha256="0" * 64), "does not match"),
    (_start(budget=-1), "budget must be positive"),
    (_start(budget=10_000_000), "budget must be between"),
    (_start(strategy="annealing"), "unknown search strategy"),
    (_start(hardware_kind="gpu/../x"), "hardware kind"),
    (_start(max_inflight=-2), "max_inflight must be positive"),
    (_start(max_inflight=100_000), "max_inflight must be between"),
    (_start(session_id="a" * 65), "session id"),
    (_start(seeds=-1), "seeds must be positive"),
    (_start(budget=4, seeds=5), "must not exceed the budget"),
    (_start(time_limit_s=-1.0), "time_limit_s must be"),
    (_start(time_limit_s=float("inf")), "time_limit_s must be"),
    (_start(plateau=-3), "plateau must be"),
    (_start(target_roofline=1.5), "target_roofline must be a fraction"),
    (_start(target_roofline=-0.1), "target_roofline must be a fraction"),
    (_start(baseline="jit"), "baseline must be one of eager, compile"),
    (_start(tune_share=1.0), "tune_share must be a fraction"),
    (_start(tune_share=-0.25), "tune_share must be a fraction"),
    (_start(tune_elite=0), "tune_elite must be at least 1"),
]


@pytest.mark.parametrize(("request_", "message"), BAD_STARTS)
async def test_bad_start_session_fields(start_gateway, request_: spb.StartSessionRequest, message: str) -> None:
    handle, _, validator = await start_gateway(settings_with())
    async with grpc.aio.insecure_channel(handle.target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await sgrpc.GatewayStub(channel).StartSession(request_)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (info.value.details() or "")
    assert validator.timeouts == []  # rejected before the spec was sent to an evaluator


@pytest.mark.parametrize(("call", "message"), [
    ("GetSession", "session_id is required"),
    ("ListCandidates", "session_id is required"),
    ("CancelSession", "session_id is required"),
    ("GetCandidate", "session_id is required"),
    ("WatchSession", "session_id is required"),
])
async def test_missing_ids(start_gateway, call: str, message: str) -> None:
    handle, _, _ = await start_gateway(settings_with())
    requests = {"GetCandidate": spb.CandidateRef(), "WatchSession": spb.WatchSessionRequest()}
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            result = getattr(stub, call)(requests.get(call, spb.SessionRef()))
            if call == "WatchSession":
                async for _ in result:
                    pass
            else:
                await result
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (info.value.details() or "")


async def test_bad_candidate_id(start_gateway) -> None:
    handle, _, _ = await start_gateway(settings_with())
    async with KernelEvolveClient(handle.target) as client:
        session = await client.start_session(SPEC, budget=1)
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        for cid, message in (("", "candidate_id is required"), ("x.y", "candidate id")):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.GetCandidate(spb.CandidateRef(session_id=session.session_id, candidate_id=cid))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in (info.value.details() or "")


async def test_the_tuning_options_reach_the_session_record_and_an_explicit_zero_stays_zero(start_gateway) -> None:
    handle, _, _ = await start_gateway(settings_with())
    async with KernelEvolveClient(handle.target) as client:
        default = await client.start_session(SPEC, budget=4)
        off = await client.start_session(SPEC, budget=4, tune_share=0.0, tune_elite=3)
    assert (default.tune_share, default.tune_elite) == (0.25, 2)
    assert (off.tune_share, off.tune_elite) == (0.0, 3)


async def test_watch_session_resumes_after_a_sequence_number(start_gateway) -> None:
    handle, bus, _ = await start_gateway(settings_with())
    subjects = Subjects("ke")
    async with KernelEvolveClient(handle.target) as client:
        session = await client.start_session(SPEC, budget=1)
        sid = session.session_id
        for i in range(3):
            await bus.publish(subjects.request(sid), envelope(sid, candidate_requested=ev.CandidateRequested(
                session_id=sid, request_id=f"r{i}", count=1)))

        async def take(n: int, after: int = 0) -> list[ev.Envelope]:
            got: list[ev.Envelope] = []
            async for env in client.watch(sid, after_sequence=after):
                got.append(env)
                if len(got) == n:
                    break
            return got

        everything = await asyncio.wait_for(take(4), 10)
        kinds = [e.WhichOneof("payload") for e in everything]
        assert kinds == ["session_started"] + ["candidate_requested"] * 3
        resumed_task = asyncio.create_task(take(3, after=everything[1].sequence))
        await asyncio.sleep(0.1)
        await bus.publish(subjects.completed(sid), envelope(sid, session_completed=ev.SessionCompleted(
            session=session)))
        resumed = await asyncio.wait_for(resumed_task, 10)
        assert [e.sequence for e in resumed[:2]] == [e.sequence for e in everything[2:]]
        assert resumed[2].WhichOneof("payload") == "session_completed"
