"""The ``Knowledge`` API on the gateway's public port: each call forwarded unchanged to the
knowledge service, behind the gateway's authentication and rate limit.

Clients (the CLI's ``knowledge`` and ``skills`` commands) thus use one API whether they
reach the knowledge service directly or through the gateway.
"""

from __future__ import annotations

from typing import Any

import grpc

from kernelevolve.errors import BusUnavailable, DependencyTimeout
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.grpc_util import error_from_status
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class KnowledgeProxy(sgrpc.KnowledgeServicer):
    def __init__(self, target: str, *, token: str = "", timeout_s: float = 60.0) -> None:
        self._target = target
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = sgrpc.KnowledgeStub(self._channel)
        self._metadata = bearer_metadata(token)
        self._timeout_s = timeout_s

    async def _forward(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        left = context.time_remaining()
        timeout = self._timeout_s if left is None else min(self._timeout_s, left)
        try:
            return await getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DependencyTimeout(f"knowledge service at {self._target} did not answer in time") from exc
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                raise BusUnavailable(f"knowledge service at {self._target} is unavailable: {exc.details()}") from exc
            raise error_from_status(exc.code(), exc.details() or "") from exc

    async def AddDocuments(self, request: spb.AddDocumentsRequest,
                           context: grpc.aio.ServicerContext) -> spb.AddDocumentsResponse:
        return await self._forward("AddDocuments", request, context)  # type: ignore[no-any-return]

    async def Search(self, request: spb.SearchKnowledgeRequest,
                     context: grpc.aio.ServicerContext) -> spb.SearchKnowledgeResponse:
        return await self._forward("Search", request, context)  # type: ignore[no-any-return]

    async def ListSkills(self, request: spb.ListSkillsRequest,
                         context: grpc.aio.ServicerContext) -> spb.ListSkillsResponse:
        return await self._forward("ListSkills", request, context)  # type: ignore[no-any-return]

    async def GetSkill(self, request: spb.SkillRef, context: grpc.aio.ServicerContext) -> pb.Skill:
        return await self._forward("GetSkill", request, context)  # type: ignore[no-any-return]

    async def RetireSkill(self, request: spb.RetireSkillRequest, context: grpc.aio.ServicerContext) -> pb.Skill:
        return await self._forward("RetireSkill", request, context)  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self._channel.close()
