"""Device-memory admission (judge/memory_admission.py) with a fake device of given sizes:
jobs share a GPU only while their footprints fit, a big or unmeasured job waits for the GPU
to be idle and runs alone, nothing waits forever; and the worker's start-up wait for
device memory (worker/memory.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
import torch

from ke_evaluator.judge.memory_admission import (
    FixedDeviceMemory,
    Footprint,
    MemoryAdmission,
    Ticket,
    requested_bytes,
)
from ke_evaluator.worker import memory

GIB = 2**30


def _admission(free_gib: float, margin: float = 1.0) -> MemoryAdmission:
    return MemoryAdmission(FixedDeviceMemory(int(free_gib * GIB), 80 * GIB), gpu="0", margin=margin)


def _until(cond: object, what: str) -> None:
    """Wait (bounded) until ``cond()`` holds; the bound is a hang guard, not a timing assertion."""
    ev = threading.Event()
    for _ in range(2000):
        if cond():  # type: ignore[operator]
            return
        ev.wait(0.01)
    raise AssertionError(f"never happened: {what}")


class _Waiter:
    """A job admitted on another thread; ``ticket`` is set once admitted, held until ``done``."""

    def __init__(self, adm: MemoryAdmission, need: int | None, alone: bool = False) -> None:
        self.ticket: Ticket | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(adm, need, alone), daemon=True)
        self.thread.start()

    def _run(self, adm: MemoryAdmission, need: int | None, alone: bool) -> None:
        with adm.admit(need, alone=alone) as t:
            self.ticket = t
            self.done.wait(60)

    def finish(self) -> None:
        self.done.set()
        self.thread.join(60)
        assert not self.thread.is_alive()


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def test_jobs_that_fit_share_the_gpu_and_the_sum_stays_under_the_free_memory(stack: ExitStack) -> None:
    adm = _admission(free_gib=10, margin=1.5)
    a = stack.enter_context(adm.admit(3 * GIB))
    b = stack.enter_context(adm.admit(3 * GIB))  # 4.5 + 4.5 <= 10
    assert (a.alone, b.alone) == (False, False)
    assert a.shared and b.shared
    assert a.reserved_bytes == b.reserved_bytes == int(4.5 * GIB)
    third = _Waiter(adm, 1 * GIB)  # 9 + 1.5 > 10: must wait
    _until(lambda: adm.waiting == 1, "third job queued")
    assert third.ticket is None and adm.running == 2
    stack.close()  # a and b end
    _until(lambda: third.ticket is not None, "third job admitted")
    assert third.ticket is not None and not third.ticket.alone
    third.finish()
    assert adm.running == 0


def test_concurrent_jobs_are_never_over_admitted() -> None:
    adm = _admission(free_gib=8, margin=1.3)
    lock = threading.Lock()
    live: list[int] = []
    peak = [0]
    errors: list[str] = []

    def job(need: int) -> None:
        with adm.admit(need) as t:
            with lock:
                live.append(t.reserved_bytes)
                peak[0] = max(peak[0], sum(live))
                if sum(live) > 8 * GIB:
                    errors.append(f"over-admitted: {sum(live)}")
            threading.Event().wait(0.002)
            with lock:
                live.remove(t.reserved_bytes)

    sizes = [GIB, 2 * GIB, 3 * GIB, GIB // 2, 5 * GIB] * 6
    threads = [threading.Thread(target=job, args=(n,)) for n in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert 0 < peak[0] <= 8 * GIB


def test_an_unmeasured_or_oversized_job_waits_for_the_idle_gpu_and_runs_alone(stack: ExitStack) -> None:
    adm = _admission(free_gib=10)
    small = _Waiter(adm, GIB)
    _until(lambda: small.ticket is not None, "small job admitted")
    big = _Waiter(adm, 20 * GIB)  # larger than the whole free memory
    _until(lambda: adm.waiting == 1, "big job queued")
    # First come, first served: a small job behind the big one waits too (no starvation).
    later = _Waiter(adm, GIB)
    _until(lambda: adm.waiting == 2, "later job queued")
    assert big.ticket is None and later.ticket is None
    small.finish()
    _until(lambda: big.ticket is not None, "big job admitted once idle")
    assert big.ticket is not None and big.ticket.alone and not big.ticket.shared
    assert big.ticket.reserved_bytes == 10 * GIB
    assert later.ticket is None  # the big job keeps the GPU to itself
    big.finish()
    _until(lambda: later.ticket is not None, "later job admitted")
    later.finish()
    # An unknown footprint (a spec's first job) is admitted the same way.
    unknown = stack.enter_context(adm.admit(None))
    assert unknown.alone and unknown.need_bytes is None


def test_asked_alone_waits_for_the_others_and_capacity_is_reread_when_idle() -> None:
    query = FixedDeviceMemory(10 * GIB, 80 * GIB)
    adm = MemoryAdmission(query, gpu=None, margin=1.0)
    with adm.admit(GIB):
        query.free_bytes = 1  # read only once the GPU is idle again
        with adm.admit(2 * GIB) as second:
            assert second.capacity_bytes == 10 * GIB and second.shared
        alone = _Waiter(adm, GIB, alone=True)
        _until(lambda: adm.waiting == 1, "alone job queued")
        assert alone.ticket is None
    _until(lambda: alone.ticket is not None, "alone job admitted")
    assert alone.ticket is not None and alone.ticket.alone and alone.ticket.capacity_bytes == 1
    alone.finish()


def test_what_idle_workers_keep_after_a_job_is_taken_from_the_capacity() -> None:
    adm = _admission(free_gib=10)
    adm.note_resident(0, GIB)  # already resident when the capacity is read
    with adm.admit(GIB):
        adm.note_resident(0, 7 * GIB)  # slot 0's cache grew by 6 GiB after its last job
        assert adm.waiting == 0
        grown = _Waiter(adm, 4 * GIB)  # 1 + 6 + 4 > 10
        _until(lambda: adm.waiting == 1, "job queued behind the grown cache")
        assert grown.ticket is None
        adm.note_resident(0, GIB)  # the worker was replaced / its cache shrank
        _until(lambda: grown.ticket is not None, "job admitted once the cache shrank")
        grown.finish()


def test_footprint_from_a_worker_report() -> None:
    assert Footprint.from_report({"inputs_bytes": 0, "job_peak_bytes": 10}) is None  # trial 0 never ran
    assert Footprint.from_report("garbage") is None
    fp = Footprint.from_report({"inputs_bytes": 400, "parameters_bytes": 40, "outputs_bytes": 400,
                                "reference_peak_bytes": 800, "job_peak_bytes": 0, "method": "cpu estimate"})
    assert fp is not None and fp.need_bytes == 400 + 40 + 800
    bigger = fp.merged(Footprint(inputs_bytes=400, job_peak_bytes=5000))
    assert bigger.need_bytes == 5000 and bigger.reference_peak_bytes == 800
    assert requested_bytes("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity") == 6 * GIB
    assert requested_bytes("no size here") == 0


# -- worker start-up -------------------------------------------------------------------------
def test_worker_start_up_waits_for_memory_with_backoff_then_starts() -> None:
    calls: list[str] = []
    slept: list[float] = []

    def init(device: torch.device) -> None:
        calls.append(str(device))
        if len(calls) < 3:
            raise torch.OutOfMemoryError("CUDA error: out of memory")

    assert memory.start_device(torch.device("cpu"), sleep=slept.append, init=init) == ""
    assert len(calls) == 3 and slept == [0.5, 1.0]


def test_worker_start_up_gives_up_within_its_bound_with_a_clear_reason() -> None:
    slept: list[float] = []

    def full(device: torch.device) -> None:
        raise torch.OutOfMemoryError("CUDA error: out of memory")

    why = memory.start_device(torch.device("cpu"), attempts=4, sleep=slept.append, init=full)
    assert "after 4 tries" in why and "out of memory" in why
    assert slept == [0.5, 1.0, 2.0]

    def broken(device: torch.device) -> None:
        raise RuntimeError("CUDA driver version is insufficient")

    slept.clear()
    why = memory.start_device(torch.device("cpu"), sleep=slept.append, init=broken)
    assert "after 1 tries" in why and not slept  # not a memory problem: no point waiting


def test_out_of_memory_is_the_device_running_out_not_the_host() -> None:
    assert memory.out_of_memory("candidate forward raised (trial 0): OutOfMemoryError: CUDA out of memory.")
    assert memory.out_of_memory("RuntimeError: Triton Error [CUDA]: out of memory")
    assert not memory.out_of_memory("out of memory: std::bad_alloc")  # the host's MemoryError


# -- reference cache: what does not fit is not held for the rest of the job ------------------
def test_reference_cache_keeps_only_what_fits_its_cap_during_the_job() -> None:
    from ke_evaluator.worker import reference_cache

    cache = reference_cache.RefCache(limit_bytes=3 * 400)
    refs = reference_cache.JobReferences(cache, ("spec", 1, ""), shared=True)
    made = [refs.inputs(f"trial {i}", lambda: [torch.zeros(100)]) for i in range(4)]  # 400 bytes each
    assert len(made) == 4 and all(m[0].numel() == 100 for m in made)
    assert refs.bundle is not None and sorted(refs.bundle.entries) == ["trial 0", "trial 1", "trial 2"]
    ref, _ = refs.reference("trial 0", lambda: (torch.ones(100), False))  # no room left beside 3 sets
    assert ref.numel() == 100 and refs.bundle.entries["trial 0"].ref_sum is None
    stats = refs.finish()
    assert stats["kept"] == "partly: 2 sets or outputs did not fit the cache"
    assert cache.used_bytes == 3 * 400


def test_a_worker_that_cannot_start_its_device_is_an_infrastructure_failure(tmp_path) -> None:  # noqa: ANN001
    """A real worker told to use CUDA on a host without it fails its device start-up the
    way a full GPU does after its retries: the slot answers ``unavailable`` (the Judge
    raises DeviceUnavailable), never a candidate's ``crashed``."""
    from ke_evaluator.judge import EvalOptions, SandboxOptions, WorkerPoolOptions
    from ke_evaluator.judge.worker_pool import Slot, WorkerProcess
    from ke_evaluator.phase_limits import JobLimits, LimitPolicy

    if torch.cuda.is_available():
        pytest.skip("needs a host without CUDA")
    opts = EvalOptions(device="cpu", sandbox=SandboxOptions(startup_timeout_s=120.0),
                       pool=WorkerPoolOptions(spare_worker=False))
    slot = Slot(0, lambda: WorkerProcess(str(tmp_path), "cuda", opts), opts, lock_wait_timeout=60.0)
    try:
        reply, worker = slot.send({"op": "shutdown"}, JobLimits(LimitPolicy(), measure=False))
    finally:
        slot.close()
    assert reply.kind == "unavailable", reply.reason
    assert "could not start its device" in reply.reason and worker.startup_failed


def test_timing_holds_only_as_many_input_sets_as_half_the_free_memory_takes() -> None:
    cpu = torch.device("cpu")
    assert memory.sets_that_fit(3, 24 * GIB, cpu, free_bytes=70 * GIB) == 1  # 12 GB inputs, twice each
    assert memory.sets_that_fit(3, 2 * GIB, cpu, free_bytes=70 * GIB) == 3
    assert memory.sets_that_fit(3, 24 * GIB, cpu, free_bytes=GIB) == 1  # never fewer than one
    assert memory.sets_that_fit(3, 24 * GIB, cpu) == 3  # the CPU: no device to ask
