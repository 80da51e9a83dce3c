"""The gateway's gRPC adapter to the evaluator's ValidateSpec waits for an evaluator that
is still starting (within the deadline) and names an unreachable one plainly. The
evaluator side here is a minimal servicer on loopback: its real ValidateSpec is tested in
tests/evaluator, and the whole path in tests/e2e (five processes)."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from ke_gateway.validator import GrpcSpecValidator
from kernelevolve.errors import BusUnavailable
from kernelevolve.spec import make_spec
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc

SPEC = make_spec("toy", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


class AcceptsAll(sgrpc.EvaluatorServicer):
    async def ValidateSpec(self, request: pb.OperatorSpec, context: grpc.aio.ServicerContext) -> object:
        return spb.ValidateSpecResponse(ok=True)


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_evaluator_that_starts_late_is_waited_for() -> None:
    port = _unused_port()
    validator = GrpcSpecValidator(f"127.0.0.1:{port}", timeout_s=60)
    server = grpc.aio.server()
    sgrpc.add_EvaluatorServicer_to_server(AcceptsAll(), server)
    try:
        pending = asyncio.create_task(validator.validate(SPEC))
        await asyncio.sleep(1.0)  # the first connection attempt is refused
        assert not pending.done()
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        result = await asyncio.wait_for(pending, timeout=60)
        assert result.ok
    finally:
        await server.stop(None)
        await validator.close()


async def test_an_evaluator_that_never_comes_is_named_unreachable() -> None:
    validator = GrpcSpecValidator(f"127.0.0.1:{_unused_port()}", timeout_s=2)
    try:
        with pytest.raises(BusUnavailable, match="could not be reached within 2 s"):
            await validator.validate(SPEC)
    finally:
        await validator.close()
