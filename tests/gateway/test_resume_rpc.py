"""ResumeSession and ListSessions over gRPC: translation, validation, status codes."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from kernelevolve.bus.subjects import Subjects
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from tests.gateway.conftest import SPEC, settings_with


async def test_list_and_resume_sessions(start_gateway) -> None:
    handle, bus, _ = await start_gateway(settings_with())
    resumes = []

    async def seen(env) -> None:
        resumes.append(env.session_resume_requested)

    await bus.consume(Subjects("ke").resume(), "test-resume", seen)
    async with grpc.aio.insecure_channel(handle.target) as channel:
        stub = sgrpc.GatewayStub(channel)
        first = (await stub.StartSession(spb.StartSessionRequest(spec=SPEC, budget=2, session_id="first"))).session
        await stub.StartSession(spb.StartSessionRequest(spec=SPEC, budget=2, session_id="second"))
        listed = (await stub.ListSessions(spb.ListSessionsRequest())).sessions
        assert {s.session_id for s in listed} == {"first", "second"}
        assert all(s.status == pb.SESSION_STATUS_RUNNING and not s.spec.source for s in listed)
        assert not (await stub.ListSessions(spb.ListSessionsRequest(status=pb.SESSION_STATUS_COMPLETED))).sessions

        resumed = await stub.ResumeSession(spb.ResumeSessionRequest(session_id=first.session_id, budget=5))
        assert resumed.resumes == 1 and resumed.budget == 5
        for _ in range(200):
            if resumes:
                break
            await asyncio.sleep(0.01)
        assert [(r.session_id, r.budget, r.attempt) for r in resumes] == [("first", 5, 1)]

        for request, code in ((spb.ResumeSessionRequest(), grpc.StatusCode.INVALID_ARGUMENT),
                              (spb.ResumeSessionRequest(session_id="first", budget=-2),
                               grpc.StatusCode.INVALID_ARGUMENT),
                              (spb.ResumeSessionRequest(session_id="nobody"), grpc.StatusCode.NOT_FOUND)):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ResumeSession(request)
            assert info.value.code() == code
