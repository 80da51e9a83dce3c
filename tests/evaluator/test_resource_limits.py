"""A reference that runs out of memory inside the evaluator's own limits is a resource
verdict (``ResourceLimitError``), never a bad spec (``InvalidSpecError``, CLI exit 2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from ke_evaluator import resource_limits
from ke_evaluator.judge import EvalOptions, Judge, WorkerPoolOptions
from kernelevolve.config import SandboxOptions
from kernelevolve.errors import InvalidSpecError, ResourceLimitError
from kernelevolve.ports.verdict import SpecCheck

from .sources import spec_for_tests

CPU_ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried "
                 "to allocate 2147483648 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize(("exc", "memory", "need"), [
    (RuntimeError(CPU_ALLOCATOR), True, 2**31),
    (MemoryError(), True, None),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"),
     True, 2**31),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 7x5)"), False, None),
    (ValueError("can't allocate"), False, None),  # only allocator failures (RuntimeError) by message
], ids=["cpu-allocator", "MemoryError", "cuda-oom", "shape-error", "value-error"])
def test_memory_errors_are_told_apart(exc: BaseException, memory: bool, need: int | None) -> None:
    assert resource_limits.is_memory_error(exc) is memory
    assert resource_limits.requested_bytes(str(exc)) == need


def test_a_failed_check_raises_the_right_error() -> None:
    with pytest.raises(ResourceLimitError, match="spec.py: resource limit"):
        SpecCheck(ok=False, reason="resource limit: ...", resource_limited=True).raise_if_failed("spec.py")
    with pytest.raises(InvalidSpecError, match="spec.py: reference raised"):
        SpecCheck(ok=False, reason="reference raised when run: ...").raise_if_failed("spec.py")
    SpecCheck(ok=True).raise_if_failed("spec.py")
    assert not issubclass(ResourceLimitError, InvalidSpecError)


LIMIT = 6 * 2**30
# The reference needs 8 GiB (a valid spec: its forward is fine, only large).
HUGE_REFERENCE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = x.new_empty(1 << 31)  # 8 GiB of float32
        return x + big[:1]


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def small_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """A CPU judge whose workers may map 6 GiB at most (RLIMIT_AS)."""
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False,
                       scratch_dir=str(tmp_path_factory.mktemp("small")),
                       sandbox=SandboxOptions(memory_limit_bytes=LIMIT),
                       pool=WorkerPoolOptions(reuse_worker_after_failure=True))
    with Judge(opts) as judge:
        yield judge


def test_a_reference_past_the_memory_limit_is_a_resource_verdict(small_judge: Judge) -> None:
    check = small_judge.validate_spec(HUGE_REFERENCE, "huge_reference")
    assert not check.ok and check.resource_limited, check.reason
    assert check.reason.startswith("resource limit: the reference ran out of memory")
    assert "an allocation of 8 GiB failed" in check.reason and "the limit is 6 GiB" in check.reason
    assert "memory_limit_bytes" in check.reason
    with pytest.raises(ResourceLimitError):
        check.raise_if_failed("huge_reference.py")
    # The same worker pool still judges ordinary specs, and a broken one stays a bad spec.
    broken = small_judge.validate_spec(spec_for_tests("raises"), "raises")
    assert not broken.ok and not broken.resource_limited and "reference raised when run" in broken.reason
