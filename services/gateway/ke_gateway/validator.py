"""The spec-validation port of the gateway, and its gRPC adapter to the evaluator.

Running a user's reference belongs in the evaluator's sandbox, so the gateway asks
an evaluator (``Evaluator.ValidateSpec``) rather than importing the spec itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import grpc

from kernelevolve.errors import BusUnavailable, DependencyTimeout
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.grpc_util import error_from_status, error_type_of
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


@dataclass(frozen=True)
class Validation:
    ok: bool
    reason: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # The reference ran out of memory inside the evaluator's limits: the spec is valid.
    resource_limited: bool = False


class SpecValidator(Protocol):
    async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
        """``timeout_s``: what is left of the caller's deadline (None: the validator's own limit)."""
        ...


class GrpcSpecValidator:
    def __init__(self, target: str, timeout_s: float = 300.0, token: str = "") -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = sgrpc.EvaluatorStub(self._channel)
        self._timeout_s = timeout_s
        self._target = target
        self._metadata = bearer_metadata(token)

    async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
        timeout = self._timeout_s if timeout_s is None else min(self._timeout_s, timeout_s)
        try:
            # wait_for_ready: an evaluator still starting (importing torch takes tens of seconds
            # on a loaded host; KEDA may be scaling it up from zero) is waited for within the
            # deadline instead of failing the session at once with "connection refused".
            resp = await self._stub.ValidateSpec(spec, timeout=timeout, metadata=self._metadata,
                                                 wait_for_ready=True)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                if self._channel.get_state() != grpc.ChannelConnectivity.READY:
                    raise BusUnavailable(f"evaluator at {self._target} could not be reached within {timeout:.0f} s "
                                         "(not started, or down)") from exc
                raise DependencyTimeout(f"evaluator at {self._target} did not validate the spec in time") from exc
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                raise BusUnavailable(f"evaluator at {self._target} is unavailable: {exc.details()}") from exc
            raise error_from_status(exc.code(), exc.details() or "", error_type_of(exc)) from exc
        return Validation(resp.ok, resp.reason, tuple(resp.warnings), resp.resource_limited)

    async def close(self) -> None:
        await self._channel.close()
