"""gRPC servicer of the evaluator: translates and delegates to EvaluatorService."""

from __future__ import annotations

import grpc

from ke_evaluator.convert import verdict_to_pb
from ke_evaluator.service import EvaluatorService
from kernelevolve.errors import NothingToComputeError
from kernelevolve.precision import check_name
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class EvaluatorServicer(sgrpc.EvaluatorServicer):
    def __init__(self, service: EvaluatorService) -> None:
        self._service = service

    async def Evaluate(self, request: spb.EvaluateRequest, context: grpc.aio.ServicerContext) -> pb.EvaluationResult:
        precision = check_name(request.precision) if request.precision else ""
        verdict = await self._service.evaluate(request.spec, request.candidate_source, request.candidate_id,
                                               precision=precision)
        return verdict_to_pb(verdict, self._service.hardware_kind)

    async def ValidateSpec(self, request: pb.OperatorSpec,
                           context: grpc.aio.ServicerContext) -> spb.ValidateSpecResponse:
        check = await self._service.validate_spec(request)
        if check.nothing_to_compute:
            # Carried as its error type (the status's metadata): the gateway ends the session
            # start with it, the CLI says it in one line (exit 1).
            raise NothingToComputeError(check.reason)
        return spb.ValidateSpecResponse(ok=check.ok, reason=check.reason, warnings=list(check.warnings),
                                        resource_limited=check.resource_limited)
