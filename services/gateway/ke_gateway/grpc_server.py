"""gRPC servicer of the gateway: translation only; errors map in the interceptor."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from ke_gateway.service import GatewayService
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class GatewayServicer(sgrpc.GatewayServicer):
    def __init__(self, service: GatewayService) -> None:
        self._service = service

    async def StartSession(self, request: spb.StartSessionRequest,
                           context: grpc.aio.ServicerContext) -> spb.StartSessionResponse:
        return spb.StartSessionResponse(session=await self._service.start_session(
            request, deadline_s=context.time_remaining()))

    async def WatchSession(self, request: spb.WatchSessionRequest,
                           context: grpc.aio.ServicerContext) -> AsyncIterator[ev.Envelope]:
        async for env in self._service.watch(request.session_id, after_sequence=request.after_sequence):
            yield env

    async def GetSession(self, request: spb.SessionRef, context: grpc.aio.ServicerContext) -> pb.Session:
        return await self._service.get_session(request.session_id)

    async def ListCandidates(self, request: spb.SessionRef,
                             context: grpc.aio.ServicerContext) -> spb.ListCandidatesResponse:
        return spb.ListCandidatesResponse(nodes=await self._service.list_nodes(request.session_id))

    async def GetCandidate(self, request: spb.CandidateRef,
                           context: grpc.aio.ServicerContext) -> spb.GetCandidateResponse:
        return await self._service.get_candidate(request.session_id, request.candidate_id)

    async def CancelSession(self, request: spb.SessionRef, context: grpc.aio.ServicerContext) -> pb.Session:
        return await self._service.cancel(request.session_id)

    async def GetReport(self, request: spb.SessionRef, context: grpc.aio.ServicerContext) -> spb.GetReportResponse:
        return spb.GetReportResponse(session_id=request.session_id,
                                     html=await self._service.get_report(request.session_id))

    async def ResumeSession(self, request: spb.ResumeSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.Session:
        return await self._service.resume(request.session_id, budget=request.budget)

    async def ListSessions(self, request: spb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> spb.ListSessionsResponse:
        return spb.ListSessionsResponse(sessions=await self._service.list_sessions(request.status))

    async def AgentNext(self, request: spb.AgentNextRequest, context: grpc.aio.ServicerContext) -> spb.AgentRequest:
        return await self._service.agent_next(request, deadline_s=context.time_remaining())

    async def AgentSubmit(self, request: spb.AgentSubmitRequest,
                          context: grpc.aio.ServicerContext) -> spb.AgentSubmitResponse:
        return await self._service.agent_submit(request)
