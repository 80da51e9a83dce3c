"""The device port of the evaluator: everything the worker and the Judge ask of a device.

A ``DeviceBackend`` answers for one kind of hardware: how a worker is pinned to one device
(visibility variables), how a timed sample is taken (synchronize, an event timer, the L2
flush and the spin that covers the host's enqueue), what the device can do at best
(roofline peaks), what identifies it (fingerprint) and what memory it has (the memory
admission's reads). The worker and the Judge call these and never ``torch.cuda`` directly,
so a new target is one adapter (README, "Add a hardware target").

Stdlib only at import: the Judge imports the port without torch; adapters import torch
themselves (the worker has it anyway).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class DevicePeaks:
    """Datasheet peaks of one device for the roofline (dense, no sparsity)."""

    name: str
    gbps: float  # memory bandwidth, GB/s
    fp32_gflops: float  # FP32 without matrix units
    tensor_gflops: float  # dense BF16/FP16 on matrix units (tensor cores, matrix cores)

    def flops_for(self, uses_matrix_units: bool) -> float:
        return self.tensor_gflops if uses_matrix_units else self.fp32_gflops


def match_peaks(table: Mapping[str, DevicePeaks], device_name: str) -> DevicePeaks | None:
    """The first table entry whose key occurs in ``device_name`` (case-insensitive); list
    longer keys first where one contains another ("MI300X" before "MI300")."""
    up = device_name.upper()
    for key, peaks in table.items():
        if key.upper() in up:
            return peaks
    return None


class EventTimer(Protocol):
    """Device time between ``start`` and ``stop``; ``elapsed_ms`` after a synchronize."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def elapsed_ms(self) -> float: ...


class DeviceBackend(ABC):
    """One kind of evaluation hardware. Judge-side methods need no device; worker-side
    methods run in a worker that was started with ``worker_environment``."""

    #: registry name, also the worker's ``--device`` argument ("cuda", "rocm", "cpu")
    name: str = ""
    #: the torch device type the worker evaluates on (HIP builds of torch say "cuda" too)
    torch_device_type: str = "cpu"
    #: True: kernels compile for a device and are timed by device events; False: the Triton
    #: interpreter on the host, timed by ``time.perf_counter``
    accelerated: bool = False
    #: environment variables that pin a worker to its device, the first the one whose
    #: entries the Judge hands out (``judge/gpus.py``)
    visibility_variables: tuple[str, ...] = ()
    #: what the verdict's timing evidence calls the clock
    clock: str = "time.perf_counter"

    # -- Judge side (no device needed) ------------------------------------------------------
    @abstractmethod
    def available(self) -> bool:
        """Whether this process can see a device of this kind."""

    #: prefixes of host variables a worker inherits besides the evaluator's allowlist
    #: (``judge/worker_environment.py``); secrets are dropped first whatever the prefix
    environment_prefixes: tuple[str, ...] = ()

    def visible_devices(self, environ: Mapping[str, str]) -> str | None:
        """This process's own visibility list: the first of ``visibility_variables`` that is
        set (None when none is: every device)."""
        for var in self.visibility_variables:
            if var in environ:
                return environ[var]
        return None

    def worker_environment(self, env: MutableMapping[str, str], visible: str | None) -> None:
        """Pin a worker's (already scrubbed) environment: ``visible`` is the entry of the
        device it gets, None to keep what the parent had."""
        env.pop("TRITON_INTERPRET", None)
        if visible is None:
            return
        # One variable pins: runtimes that read several compose them (ROCm filters by
        # ROCR_VISIBLE_DEVICES, then indexes that list with HIP_VISIBLE_DEVICES), so the
        # same entry in two of them would hide the device.
        first, *others = self.visibility_variables
        env[first] = visible
        for var in others:
            env.pop(var, None)

    def device_count(self) -> int:
        return 0

    def memory_info(self, index: int) -> tuple[int, int]:
        """(free, total) bytes of device ``index`` of this process; (0, 0) when it cannot say."""
        return 0, 0

    # -- worker side ------------------------------------------------------------------------
    @abstractmethod
    def torch_device(self) -> Any:
        """The ``torch.device`` a worker evaluates on (its one visible device)."""

    def start(self, device: Any) -> None:
        """Create the device context and make ``device`` current (may raise out of memory)."""
        return None  # nothing to do without a device

    def synchronize(self) -> None:
        """Wait for all work queued on the device (device-wide)."""
        return None  # nothing to do without a device

    def event_timer(self) -> EventTimer:
        raise NotImplementedError(f"{self.name}: no device events (not an accelerated backend)")

    def l2_flush_buffer(self, device: Any) -> Any | None:
        """A tensor whose ``zero_()`` evicts the device's last-level cache; None: no flush."""
        return None

    def spin_cycles_per_ms(self, device: Any) -> float:
        """Rate of ``spin``: cycles per millisecond of the device's clock when busy."""
        return 0.0

    def spin(self, cycles: int) -> None:
        """Queue a kernel that keeps the device busy for ``cycles`` clock cycles."""
        return None  # nothing to do without a device

    def fingerprint(self, device: Any) -> dict[str, str]:
        """Device fields of the environment fingerprint (``device_name`` at least)."""
        return {}

    def peaks(self, device_name: str) -> DevicePeaks | None:
        """Roofline peaks of the named device; None when unknown (or interpreted)."""
        return None

    def profiler_device(self) -> str | None:
        """The autograd profiler's ``use_device`` for kernel times; None: CPU times only."""
        return None

    def mem_get_info(self, device: Any) -> tuple[int, int]:
        """(free, total) bytes of the worker's device; (0, 0): no allocator to ask."""
        return 0, 0

    def memory_allocated(self, device: Any) -> int:
        return 0

    def memory_reserved(self, device: Any) -> int:
        return 0

    def max_memory_allocated(self, device: Any) -> int:
        return 0

    def reset_peak_memory(self, device: Any) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def timer_objects(self) -> dict[str, Any]:
        """Timing functions a candidate must not replace (checked by identity before and after)."""
        return {}


BackendFactory = Callable[[], DeviceBackend]
