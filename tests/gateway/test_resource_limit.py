"""A spec whose reference ran out of memory inside the evaluator's limits reaches the
client as ``ResourceLimitError`` (RESOURCE_EXHAUSTED naming the error type; not retried
as a rate limit), a broken spec as ``InvalidArgumentError`` (INVALID_ARGUMENT)."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from ke_cli.client import KernelEvolveClient
from ke_gateway import app as gateway_app
from ke_gateway.validator import Validation
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.errors import InvalidArgumentError, NothingToComputeError, ResourceLimitError
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from tests.gateway.conftest import SPEC, settings_with

pytestmark = pytest.mark.integration

OOM = ("resource limit: the reference ran out of memory (an allocation of 2 GiB failed; the limit is 16 GiB of "
       "worker address space (evaluator.sandbox.memory_limit_bytes)); the spec is not at fault")


class FixedValidator:
    """Answers every spec with one validation; counts the calls."""

    def __init__(self, answer: Validation) -> None:
        self.answer = answer
        self.calls = 0

    async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
        self.calls += 1
        return self.answer


@pytest.mark.parametrize(("answer", "error", "text"), [
    (Validation(False, OOM, resource_limited=True), ResourceLimitError, "resource limit"),
    (Validation(False, "reference raised when run: RuntimeError: shapes"), InvalidArgumentError, "reference raised"),
], ids=["resource-limit", "bad-spec"])
async def test_validation_failures_reach_the_client_as_their_own_errors(answer: Validation, error: type,
                                                                        text: str) -> None:
    async with AsyncExitStack() as stack:
        bus, validator = MemoryBus(), FixedValidator(answer)
        stack.push_async_callback(bus.close)
        handle = await gateway_app.start(settings_with(), stack, bus=bus, store=MemoryStore(), validator=validator,
                                         port=0, default_hardware="cpu")
        async with KernelEvolveClient(handle.target) as client:
            with pytest.raises(error, match=text) as info:
                await client.start_session(SPEC, 1)
    assert type(info.value) is error
    assert validator.calls == 1  # RESOURCE_EXHAUSTED of ours is not retried like a rate limit


class RefusingValidator:
    """An evaluator's answer for a spec whose reference only views its inputs: the error type
    it sends with the status (``GrpcSpecValidator`` raises it again)."""

    def __init__(self) -> None:
        self.calls = 0

    async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
        self.calls += 1
        raise NothingToComputeError("nothing to compute: the reference only reshapes its inputs (its output is a "
                                    "view of its inputs)")


async def test_nothing_to_compute_reaches_the_client_as_its_own_error() -> None:
    async with AsyncExitStack() as stack:
        bus, validator = MemoryBus(), RefusingValidator()
        stack.push_async_callback(bus.close)
        handle = await gateway_app.start(settings_with(), stack, bus=bus, store=MemoryStore(), validator=validator,
                                         port=0, default_hardware="cpu")
        async with KernelEvolveClient(handle.target) as client:
            with pytest.raises(NothingToComputeError, match="^nothing to compute: the reference only reshapes"):
                await client.start_session(SPEC, 1)
    assert validator.calls == 1
