"""Device memory inside the worker: what one job allocates, out-of-memory reports, and
device start-up that waits for memory.

``JobMemory`` measures a job for the Judge's admission (``judge/memory_admission.py``):
one input set, the weights, the reference's outputs, the reference's own peak around one
call, and (CUDA) the whole job's peak allocation above what the worker held when the job
began (its reference cache, its context's workspace). On the CPU there is no allocator to
ask: the parts are sized from the tensors and the job peak stays 0.

The allocator is asked through the device backend (``ke_evaluator.backends``).
Worker side: torch only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..backends import DeviceBackend, for_torch_device
from . import output_checks


def tensor_bytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for t in output_checks.leaves(obj) if isinstance(t, torch.Tensor))


def model_bytes(model: torch.nn.Module) -> int:
    return tensor_bytes(list(model.parameters()) + list(model.buffers()))


def device_info(device: torch.device, backend: DeviceBackend | None = None) -> tuple[int, int]:
    """(free, total) bytes of the device; (0, 0) on the CPU or when the device cannot say."""
    backend = backend if backend is not None else for_torch_device(device)
    if not backend.accelerated:
        return 0, 0
    try:
        return backend.mem_get_info(device)
    except RuntimeError:
        return 0, 0


class JobMemory:
    """One job's measurement. Not thread-safe (one job at a time per worker)."""

    def __init__(self, device: torch.device, backend: DeviceBackend | None = None) -> None:
        self.device = device
        self.backend = backend if backend is not None else for_torch_device(device)
        self.cuda = self.backend.accelerated  # an allocator to ask
        self.parts: dict[str, int] = {}
        self.base = 0
        self._peak = 0  # job peak above ``base`` before the last reset of torch's peak counter
        if self.cuda:
            self.base = self.backend.memory_allocated(device)
            self.backend.reset_peak_memory(device)

    def _peak_now(self) -> int:
        if not self.cuda:
            return 0
        try:
            return max(self._peak, self.backend.max_memory_allocated(self.device) - self.base)
        except RuntimeError:  # a CUDA error of the job: the verdict says so already
            return self._peak

    @contextmanager
    def reference(self, outputs: Callable[[], Any] | None = None) -> Iterator[None]:
        """Measure the reference's own peak around one call (resets torch's peak counter, so
        the job peak so far is kept first)."""
        if self.cuda:
            self._peak = self._peak_now()
            before = self.backend.memory_allocated(self.device)
            self.backend.reset_peak_memory(self.device)
        yield
        if self.cuda:
            ref_peak = self.backend.max_memory_allocated(self.device) - before
            self.parts["reference_peak_bytes"] = max(self.parts.get("reference_peak_bytes", 0), ref_peak)

    def note(self, inputs: Any, model: torch.nn.Module, outputs: Any) -> None:
        self.parts["inputs_bytes"] = tensor_bytes(inputs)
        self.parts["parameters_bytes"] = model_bytes(model)
        self.parts["outputs_bytes"] = tensor_bytes(outputs)
        if not self.cuda:  # no allocator to ask: the reference's peak is at least its outputs
            self.parts["reference_peak_bytes"] = self.parts["outputs_bytes"]

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"inputs_bytes": 0, "parameters_bytes": 0, "outputs_bytes": 0,
                               "reference_peak_bytes": 0, **self.parts}
        out["job_peak_bytes"] = self._peak_now()
        out["method"] = (f"{self.backend.name} max_memory_allocated" if self.cuda
                         else "cpu estimate from tensor sizes")
        if self.cuda:
            out["held_before_job_bytes"] = self.base
            try:  # what stays after the job: the reference cache, a compiled baseline's state
                out["held_after_job_bytes"] = self.backend.memory_allocated(self.device)
            except RuntimeError:
                out["held_after_job_bytes"] = self.base
            out["device_free_bytes"], out["device_total_bytes"] = device_info(self.device, self.backend)
        return out


def sets_that_fit(wanted: int, set_bytes: int, device: torch.device, free_bytes: int | None = None,
                  backend: DeviceBackend | None = None) -> int:
    """How many input sets of ``set_bytes`` each a job may hold at once: ``wanted``, or as
    many as half the device's free memory holds (at least one). The other half is for the
    calls on them. ``free_bytes`` None: read the device (the CPU: no limit)."""
    if free_bytes is None:
        backend = backend if backend is not None else for_torch_device(device)
        free_bytes = device_info(device, backend)[0]
        if backend.accelerated and free_bytes:
            # Blocks this process's allocator holds but does not use are free to it too.
            free_bytes += backend.memory_reserved(device) - backend.memory_allocated(device)
    if not free_bytes or set_bytes <= 0:
        return max(1, wanted)
    return max(1, min(wanted, (free_bytes // 2) // set_bytes))


def out_of_memory(reason: str) -> bool:
    """Whether a runtime fault was the device running out of memory: torch's
    ``OutOfMemoryError`` (a candidate call, the reference or our own copies) or a device
    launch that failed for memory (Triton: ``Triton Error [CUDA]: out of memory``, ``[HIP]``
    on ROCm). The host's ``MemoryError`` is not: no device admission would have helped it."""
    low = reason.lower()
    return "OutOfMemoryError" in reason or (("cuda" in low or "[hip]" in low) and "out of memory" in low)


def release_cached(device: torch.device, backend: DeviceBackend | None = None) -> None:
    """Hand the caching allocator's unused blocks back to the driver after a job: an idle
    worker otherwise keeps its largest job's memory reserved, invisible to the admission
    and unusable by the other workers on the GPU."""
    backend = backend if backend is not None else for_torch_device(device)
    if backend.accelerated:
        gc.collect()  # tensors only a reference cycle still holds
        backend.empty_cache()


def _init_device(device: torch.device) -> None:
    for_torch_device(device).start(device)


def start_device(device: torch.device, attempts: int = 8, first_delay_s: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep,
                 init: Callable[[torch.device], None] = _init_device) -> str:
    """Create the device context and make ``device`` current, waiting while the GPU has no
    memory for it (another worker's job may be at its peak): retries with doubling delays
    (0.5 s to 32 s, about a minute in all; ``sleep`` may let the device lock go meanwhile).
    Returns '' when started, else why not (the caller reports an infrastructure failure,
    never a candidate's verdict)."""
    delay = first_delay_s
    last = ""
    for attempt in range(attempts):
        try:
            init(device)
            return ""
        except Exception as exc:  # noqa: BLE001 - any start-up failure is the device's, never a candidate's
            last = f"{type(exc).__name__}: {exc}"[:300]
            if "out of memory" not in str(exc).lower() or attempt == attempts - 1:
                break
            sleep(delay)
            delay *= 2
    return f"could not start the device after {attempt + 1} tries: {last}"
