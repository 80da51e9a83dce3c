"""A device backend from outside the evaluator package: a simulated accelerator on the host.

It takes the accelerated paths of the worker and the Judge (device events, a flush buffer,
a spin, synchronize, memory reads, a peak table, pinning by its own variable) while the
kernels run in Triton's interpreter on CPU tensors, so a judged evaluation runs through it
on any machine. Its clock is ``perf_counter``; its numbers say nothing about any hardware.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from typing import Any

import torch

from ke_evaluator.backends import DeviceBackend, DevicePeaks, EventTimer, match_peaks

FAKE_DEVICE_NAME = "Fake Accelerator FX-1"
PEAKS = {"FX-1": DevicePeaks("FX-1", 100.0, 1_000.0, 8_000.0)}
TOTAL_BYTES = 8 * 2**30


class HostEvents:
    """Device events of the fake: host time, which is all a host-side "device" has."""

    def __init__(self) -> None:
        self._t0 = 0.0
        self._t1 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        self._t1 = time.perf_counter()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) * 1000.0


class FakeBackend(DeviceBackend):
    name = "fake"
    torch_device_type = "cpu"
    accelerated = True
    visibility_variables = ("FAKE_VISIBLE_DEVICES",)
    clock = "fake accelerator: host perf_counter events"

    def __init__(self) -> None:
        self.synchronized = 0
        self.spun = 0
        self.allocated_peak = 0

    def available(self) -> bool:
        return True

    def worker_environment(self, env: MutableMapping[str, str], visible: str | None) -> None:
        super().worker_environment(env, visible)
        env["TRITON_INTERPRET"] = "1"  # its kernels run in the interpreter
        env["CUDA_VISIBLE_DEVICES"] = ""

    def device_count(self) -> int:
        return 2

    def memory_info(self, index: int) -> tuple[int, int]:
        return TOTAL_BYTES // 2, TOTAL_BYTES

    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def synchronize(self) -> None:
        self.synchronized += 1

    def event_timer(self) -> EventTimer:
        return HostEvents()

    def l2_flush_buffer(self, device: Any) -> torch.Tensor:
        return torch.empty(1024, dtype=torch.int32, device=device)

    def spin_cycles_per_ms(self, device: Any) -> float:
        return 1000.0

    def spin(self, cycles: int) -> None:
        self.spun += 1

    def fingerprint(self, device: Any) -> dict[str, str]:
        # What the worker was pinned to: the Judge set it through ``worker_environment``.
        return {"device_name": FAKE_DEVICE_NAME, "fake_driver": "1.0",
                "visible": os.environ.get(self.visibility_variables[0], "")}

    def peaks(self, device_name: str) -> DevicePeaks | None:
        return match_peaks(PEAKS, device_name)

    def mem_get_info(self, device: Any) -> tuple[int, int]:
        return self.memory_info(0)

    def timer_objects(self) -> dict[str, Any]:
        return {"fake.HostEvents.elapsed_ms": HostEvents.elapsed_ms}
