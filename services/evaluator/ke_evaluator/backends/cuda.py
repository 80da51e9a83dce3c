"""NVIDIA GPUs through torch's CUDA build and Triton's NVIDIA backend.

What it measures is what the evaluator measured before the port existed: a 256 MB int32
buffer zeroed before every trial (larger than any L2 so far: 50 MB on H100), a
``torch.cuda._sleep`` spin whose rate is measured once per device and process, CUDA events
around the call and a device-wide synchronize.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from .port import DeviceBackend, DevicePeaks, EventTimer, match_peaks

L2_FLUSH_BYTES = 256 * 1024 * 1024

# Public datasheet numbers (SXM parts, dense).
PEAKS: dict[str, DevicePeaks] = {
    "H200": DevicePeaks("H200", 4800.0, 67_000.0, 989_000.0),
    "H100": DevicePeaks("H100", 3350.0, 67_000.0, 989_000.0),
    "A100": DevicePeaks("A100", 2039.0, 19_500.0, 312_000.0),
}

# Bound at import, before any candidate code runs in the worker (as timing.py binds
# perf_counter): a candidate that replaces them mid-timing does not change our clock (and
# is rejected by the identity check of global_state.py).
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_sleep = torch.cuda._sleep
_SPIN_RATES: dict[int, float] = {}  # device index -> cycles per ms, see spin_cycles_per_ms


class TorchEvents:
    """A pair of ``torch.cuda.Event`` (HIP builds map them to hipEvents)."""

    def __init__(self, event: Any) -> None:
        self._start = event(enable_timing=True)
        self._end = event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_ms(self) -> float:
        return float(self._start.elapsed_time(self._end))


class CudaBackend(DeviceBackend):
    name = "cuda"
    torch_device_type = "cuda"
    accelerated = True
    visibility_variables: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES",)
    clock = "cuda events behind a spin kernel + device synchronize; host enqueue time apart"
    peak_table: dict[str, DevicePeaks] = PEAKS
    flush_bytes = L2_FLUSH_BYTES

    # -- Judge side --------------------------------------------------------------------------
    def available(self) -> bool:
        return bool(torch.cuda.is_available())

    def device_count(self) -> int:
        return int(torch.cuda.device_count())

    def memory_info(self, index: int) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(index)
        return int(free), int(total)

    # -- worker side -------------------------------------------------------------------------
    def torch_device(self) -> torch.device:
        return torch.device("cuda:0")  # the worker sees its one device only

    def start(self, device: Any) -> None:
        torch.cuda.init()
        torch.cuda.set_device(device)
        # The first allocation maps the context's workspace; it may fail as late as here.
        torch.empty(1, device=device)

    def synchronize(self) -> None:
        _synchronize()

    def event_timer(self) -> EventTimer:
        return TorchEvents(_Event)

    def l2_flush_buffer(self, device: Any) -> torch.Tensor:
        return torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=device)

    def spin(self, cycles: int) -> None:
        _sleep(cycles)

    def spin_cycles_per_ms(self, device: Any) -> float:
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in _SPIN_RATES:
            _SPIN_RATES[index] = spin_rate(self.spin, self.event_timer, self.synchronize)
        return _SPIN_RATES[index]

    def fingerprint(self, device: Any) -> dict[str, str]:
        props = torch.cuda.get_device_properties(device)
        fp = {"device_name": props.name}
        fp.update(self._toolkit())
        fp["compute_capability"] = f"{props.major}.{props.minor}"
        fp["device_memory_gb"] = f"{props.total_memory / 2**30:.1f}"
        fp["driver"] = self._driver()
        # Which physical card judged: on a host of several GPUs each worker sees its own as
        # device 0, so only the UUID tells two verdicts' GPUs apart (no evaluation on a GPU
        # that another evaluator holds is checked from these).
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            fp["device_uuid"] = str(uuid)
        return fp

    def _toolkit(self) -> dict[str, str]:
        return {"cuda": str(torch.version.cuda)}

    def _driver(self) -> str:
        first = first_line("/proc/driver/nvidia/version")
        if first is None:
            return "unknown"
        found = re.search(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b", first)
        return found.group(1) if found else first.strip()[:80]

    def peaks(self, device_name: str) -> DevicePeaks | None:
        return match_peaks(self.peak_table, device_name)

    def profiler_device(self) -> str | None:
        return "cuda"

    def mem_get_info(self, device: Any) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(device)
        return int(free), int(total)

    def memory_allocated(self, device: Any) -> int:
        return int(torch.cuda.memory_allocated(device))

    def memory_reserved(self, device: Any) -> int:
        return int(torch.cuda.memory_reserved(device))

    def max_memory_allocated(self, device: Any) -> int:
        return int(torch.cuda.max_memory_allocated(device))

    def reset_peak_memory(self, device: Any) -> None:
        torch.cuda.reset_peak_memory_stats(device)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def timer_objects(self) -> dict[str, Any]:
        return torch_cuda_timer_objects()


def first_line(path: str) -> str | None:
    """The first line of a driver's version file; None when there is none."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline()
    except OSError:
        return None


def spin_rate(spin: Callable[[int], None], timer: Callable[[], EventTimer], sync: Callable[[], None]) -> float:
    """Clock cycles per millisecond of ``spin``, measured once per device and process (a
    Timer is built for every judged candidate; the clock rate is the device's, not the
    candidate's).

    An idle H100 sat at 345 MHz against a 1980 MHz boost clock: a rate measured before the
    clocks rise would make every spin several times shorter than meant. So: spin a while
    to wake the clocks, then keep the highest of a few rates (an overestimate only makes
    spins longer, which costs a little GPU time and nothing in accuracy)."""
    cycles = 2_000_000
    spin(20 * cycles)
    best = 0.0
    for _ in range(3):
        events = timer()
        events.start()
        spin(cycles)
        events.stop()
        sync()
        best = max(best, cycles / max(events.elapsed_ms(), 1e-3))
    return best


def torch_cuda_timer_objects() -> dict[str, Any]:
    """The ``torch.cuda`` timing functions (CUDA and HIP builds alike)."""
    return {
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
    }
