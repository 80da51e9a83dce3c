"""Device-memory admission: which evaluations may share one GPU at a time.

Workers of a Judge share a GPU. Without admission, eight workers judging operators whose
inputs range from 0.1 to 12 GB on one 80 GB H100 ended 67 of 239 evaluations as
``OutOfMemoryError`` (3 workers: 45 of 135): correct candidates failed because of their
neighbours. Here each evaluation reserves its spec's measured footprint times a margin,
and is admitted only while the reservations on its GPU fit the memory that was free when
the GPU was last idle:

* a spec never measured on this Judge (no footprint yet) runs alone: its first job
  measures the footprint (``Footprint.from_report``) that later jobs of the spec reserve;
  a spec validated on this Judge starts from the estimate of its validation instead
  (``Footprint.from_validation``, ``estimate_job_bytes``) and may share the GPU at once;
* a job whose reservation exceeds the whole capacity runs alone (it waits for the GPU to
  be idle and keeps others out while it runs), so no job waits forever: the largest one
  still runs, and if it then runs out of memory alone, that is its verdict;
* admission is first come, first served per GPU: a job that must run alone is not
  starved by a stream of small ones behind it.

Capacity is the device's free memory read when none of our jobs runs (idle workers'
CUDA contexts and reference caches are then already counted as used), read again each
time the GPU becomes idle. ``DeviceMemory`` is the port that reads it: ``TorchDeviceMemory``
(the device backend's ``memory_info``) on a GPU host, ``FixedDeviceMemory`` with given sizes in
tests. Admission happens in the Judge before a job is sent to its worker, so the wait is
never on the candidate's phase clocks.

Stdlib only at import: imported by the Judge (torch is imported lazily by the real adapter).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..backends import DeviceBackend, get_backend
from . import gpus

GIB = float(2**30)


@dataclass(frozen=True)
class MemoryInfo:
    free_bytes: int
    total_bytes: int


class DeviceMemory(Protocol):
    """Reads the free and total memory of one GPU (a ``CUDA_VISIBLE_DEVICES`` entry of the
    Judge's process, or None for the Judge's only GPU)."""

    def __call__(self, gpu: str | None) -> MemoryInfo: ...


class TorchDeviceMemory:
    """The device backend's memory read (``torch.cuda.mem_get_info`` on CUDA and ROCm) in
    the Judge's process. The first call creates a device context there (a few hundred MiB
    of the GPU, read as used from then on, so admission accounts for it). ``gpu`` is mapped
    to the index this process sees it under."""

    def __init__(self, visible: list[str] | None = None, backend: DeviceBackend | None = None) -> None:
        self.visible = visible  # this process's visibility entries (CUDA_VISIBLE_DEVICES); read on first use
        self._backend = backend  # None: the CUDA backend, loaded (with torch) on first use

    @property
    def backend(self) -> DeviceBackend:
        if self._backend is None:
            self._backend = get_backend("cuda")
        return self._backend

    def _index(self, gpu: str | None, device_count: int) -> int:
        if self.visible is None:
            self.visible = gpus.visible_gpus(self.backend.visible_devices(os.environ), device_count)
        if gpu is None:
            return 0
        if gpu in self.visible:
            return self.visible.index(gpu)
        return int(gpu) if gpu.isdigit() and int(gpu) < device_count else 0

    def __call__(self, gpu: str | None) -> MemoryInfo:
        free, total = self.backend.memory_info(self._index(gpu, self.backend.device_count()))
        return MemoryInfo(free, total)


@dataclass
class FixedDeviceMemory:
    """Test double: every GPU has ``free_bytes`` free of ``total_bytes``; counts its reads."""

    free_bytes: int
    total_bytes: int = 0
    reads: int = 0

    def __call__(self, gpu: str | None) -> MemoryInfo:
        self.reads += 1
        return MemoryInfo(self.free_bytes, max(self.total_bytes, self.free_bytes))


# -- footprint of a spec -----------------------------------------------------------------------
def estimate_job_bytes(inputs: int, outputs: int, parameters: int, reference_peak: int, float_bytes: int = 4,
                       device_total: int = 0) -> int:
    """What one evaluation of a spec allocates on the device, predicted from the sizes of
    one input set (``inputs``), its outputs, the weights and the reference's own peak
    around one call (``reference_peak``, at least its outputs), before any job ran.

    The harness holds one input set and the call's copy of it, the candidate's output and
    one reference call's peak (README "Memory"): ``2 x inputs + outputs + reference peak``,
    at least twice inputs + outputs; large references, trial 0's inputs and the audit's
    snapshots wait on the host. The float64 reference run adds its inputs and its peak
    widened to 8 bytes an element (``8 / float_bytes``) beside that when it fits the
    device (``device_total``; 0: assume it does), else it runs on the host
    (``worker/memory.float64_fits``)."""
    peak = max(reference_peak, outputs)
    held = 2 * inputs + outputs
    base = held + peak + parameters
    widen = 8.0 / max(1, min(8, float_bytes))
    float64 = int(widen * (inputs + peak + parameters))
    if device_total and held + parameters + float64 * 1.25 > device_total:
        return base
    return max(base, held + parameters + float64)


@dataclass(frozen=True)
class Footprint:
    """Device memory one evaluation of a spec takes, as a worker measured it
    (``worker/memory.py``). Bytes; ``job_peak_bytes`` is the whole job's peak allocation
    above what the worker held before it (CUDA: ``torch.cuda.max_memory_allocated``; on CPU
    0, and the parts estimate below stands in). ``estimated_bytes``: the prediction of
    ``estimate_job_bytes`` from spec validation, used until a job measures the peak."""

    inputs_bytes: int = 0
    parameters_bytes: int = 0
    outputs_bytes: int = 0
    reference_peak_bytes: int = 0
    job_peak_bytes: int = 0
    method: str = ""
    estimated_bytes: int = 0

    @property
    def need_bytes(self) -> int:
        """What a job of the spec allocates: its measured peak (or, before any job, the
        estimate), never less than one input set, the weights and the reference's own peak
        together."""
        parts = self.inputs_bytes + self.parameters_bytes + max(self.reference_peak_bytes, self.outputs_bytes)
        return max(self.job_peak_bytes or self.estimated_bytes, parts)

    @classmethod
    def from_report(cls, report: Any) -> Footprint | None:
        """From a worker's ``evidence["memory"]``; None when it measured nothing usable."""
        if not isinstance(report, dict):
            return None
        try:
            fp = cls(**{k: int(report.get(k, 0) or 0) for k in
                        ("inputs_bytes", "parameters_bytes", "outputs_bytes", "reference_peak_bytes",
                         "job_peak_bytes")}, method=str(report.get("method", "")))
        except (TypeError, ValueError):
            return None
        return fp if fp.need_bytes > 0 and fp.inputs_bytes > 0 else None

    @classmethod
    def from_validation(cls, sizes: Any, device_total: int = 0) -> Footprint | None:
        """A spec's footprint predicted from what its validation measured (``info["memory"]``:
        sizes of one set, its outputs, the weights and the reference's peak), so that its
        first evaluation need not run alone to be measured. None when it measured nothing."""
        fp = cls.from_report(sizes)
        if fp is None:
            return None
        try:
            float_bytes = int(sizes.get("float_bytes", 4) or 4)
        except (TypeError, ValueError):
            float_bytes = 4
        est = estimate_job_bytes(fp.inputs_bytes, fp.outputs_bytes, fp.parameters_bytes, fp.reference_peak_bytes,
                                 float_bytes, device_total)
        return Footprint(inputs_bytes=fp.inputs_bytes, parameters_bytes=fp.parameters_bytes,
                         outputs_bytes=fp.outputs_bytes, reference_peak_bytes=fp.reference_peak_bytes,
                         job_peak_bytes=0, method="estimate from spec validation", estimated_bytes=est)

    def merged(self, other: Footprint) -> Footprint:
        """The larger of two measurements, field by field (a later job may take more); a
        measured peak replaces an estimate."""
        return Footprint(inputs_bytes=max(self.inputs_bytes, other.inputs_bytes),
                         parameters_bytes=max(self.parameters_bytes, other.parameters_bytes),
                         outputs_bytes=max(self.outputs_bytes, other.outputs_bytes),
                         reference_peak_bytes=max(self.reference_peak_bytes, other.reference_peak_bytes),
                         job_peak_bytes=max(self.job_peak_bytes, other.job_peak_bytes),
                         method=other.method or self.method,
                         estimated_bytes=max(self.estimated_bytes, other.estimated_bytes))

    def to_dict(self) -> dict[str, Any]:
        return {"inputs_bytes": self.inputs_bytes, "parameters_bytes": self.parameters_bytes,
                "outputs_bytes": self.outputs_bytes, "reference_peak_bytes": self.reference_peak_bytes,
                "job_peak_bytes": self.job_peak_bytes, "estimated_bytes": self.estimated_bytes,
                "need_bytes": self.need_bytes, "method": self.method}


_TRIED = re.compile(r"[Tt]ried to allocate ([0-9.]+) ?(GiB|MiB|KiB|B)\b")
_UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}


def requested_bytes(message: str) -> int:
    """The allocation an out-of-memory message says failed (``Tried to allocate 6.00 GiB``), or 0."""
    found = _TRIED.search(message or "")
    return int(float(found.group(1)) * _UNITS[found.group(2)]) if found else 0


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# -- admission ---------------------------------------------------------------------------------
@dataclass
class Ticket:
    """One admitted job: what it reserved and whether any other job ran beside it."""

    need_bytes: int | None
    reserved_bytes: int = 0
    alone: bool = False  # admitted as the only job (unknown or oversized footprint, or asked)
    shared: bool = False  # another job of ours held a ticket on this GPU at some time meanwhile
    waited_s: float = 0.0
    capacity_bytes: int = 0
    total_bytes: int = 0

    def evidence(self) -> dict[str, Any]:
        return {"need_bytes": self.need_bytes, "reserved_bytes": self.reserved_bytes, "alone": self.alone,
                "shared": self.shared, "waited_s": round(self.waited_s, 4), "capacity_bytes": self.capacity_bytes,
                "device_total_bytes": self.total_bytes}


@dataclass
class _Request:
    need: int | None
    alone: bool
    ticket: Ticket | None = None
    order: int = 0


@dataclass
class MemoryAdmission:
    """Admission of jobs to one GPU by memory (thread-safe; one per GPU of a Judge).

    ``margin``: factor on a footprint for what differs between candidates of a spec (see
    ``WorkerPoolOptions.memory_margin``).
    """

    query: DeviceMemory
    gpu: str | None = None
    margin: float = 1.5
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _running: list[Ticket] = field(default_factory=list, repr=False)
    _queue: deque[_Request] = field(default_factory=deque, repr=False)
    _capacity: MemoryInfo | None = field(default=None, repr=False)
    _exclusive: bool = field(default=False, repr=False)
    _order: int = field(default=0, repr=False)
    # Bytes each idle worker keeps allocated between jobs (its reference cache, compiled
    # baselines), as last reported, and as they were when the capacity was read: what
    # grew since is taken from the capacity until the GPU is idle and read again.
    _resident: dict[object, int] = field(default_factory=dict, repr=False)
    _resident_at_read: dict[object, int] = field(default_factory=dict, repr=False)

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def device_total(self) -> int:
        with self._cond:
            return self._read().total_bytes

    def _read(self) -> MemoryInfo:
        """Capacity: re-read whenever none of our jobs runs (under the condition's lock)."""
        if self._capacity is None or not self._running:
            self._capacity = self.query(self.gpu)
            self._resident_at_read = dict(self._resident)
        return self._capacity

    def _grown(self) -> int:
        return sum(max(0, n - self._resident_at_read.get(k, 0)) for k, n in self._resident.items())

    def note_resident(self, worker: object, nbytes: int) -> None:
        """A worker's allocation that stays after its job (reported with the job). A
        replaced worker's entry stays until its slot's next job reports: conservative."""
        with self._cond:
            self._resident[worker] = max(0, int(nbytes))
            self._cond.notify_all()

    def _admissible(self, req: _Request) -> bool:
        if self._queue[0] is not req or self._exclusive:
            return False  # first come, first served; an alone job keeps everyone out
        cap = self._read()
        if req.need is None or req.alone or req.need * self.margin > cap.free_bytes:
            return not self._running
        used = sum(t.reserved_bytes for t in self._running) + self._grown()
        return used + req.need * self.margin <= cap.free_bytes

    @contextmanager
    def admit(self, need_bytes: int | None, alone: bool = False) -> Iterator[Ticket]:
        """Hold a reservation for ``need_bytes`` (None: unknown, run alone) while the block
        runs; waits until it fits. ``alone``: wait until the GPU is idle and keep it."""
        t0 = time.monotonic()
        with self._cond:
            self._order += 1
            req = _Request(need_bytes, alone, order=self._order)
            self._queue.append(req)
            try:
                while not self._admissible(req):
                    self._cond.wait()
            except BaseException:
                self._queue.remove(req)
                self._cond.notify_all()
                raise
            self._queue.popleft()
            cap = self._read()
            runs_alone = not self._running and (
                need_bytes is None or alone or need_bytes * self.margin > cap.free_bytes)
            reserved = cap.free_bytes if runs_alone else int(need_bytes * self.margin)  # type: ignore[operator]
            ticket = Ticket(need_bytes=need_bytes, reserved_bytes=reserved, alone=runs_alone,
                            waited_s=time.monotonic() - t0, capacity_bytes=cap.free_bytes,
                            total_bytes=cap.total_bytes)
            if self._running:
                ticket.shared = True
                for other in self._running:
                    other.shared = True
            self._running.append(ticket)
            self._exclusive = runs_alone
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield ticket
        finally:
            with self._cond:
                self._running.remove(ticket)
                if ticket.alone:
                    self._exclusive = False
                self._cond.notify_all()
