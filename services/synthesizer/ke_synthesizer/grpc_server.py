"""gRPC servicer of the synthesizer: translates and delegates to SynthesizerService."""

from __future__ import annotations

import grpc

from ke_synthesizer.service import SynthesizerService, to_proposal_pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class SynthesizerServicer(sgrpc.SynthesizerServicer):
    def __init__(self, service: SynthesizerService) -> None:
        self._service = service

    async def Propose(self, request: spb.ProposeRequest, context: grpc.aio.ServicerContext) -> spb.ProposeResponse:
        proposals = await self._service.propose(request)
        return spb.ProposeResponse(proposals=[to_proposal_pb(p) for p in proposals])
