"""AMD Instinct GPUs through torch's ROCm (HIP) build and Triton's AMD backend.

torch's HIP build keeps the ``torch.cuda`` API (``torch.version.hip`` set, device type
"cuda", ``torch.cuda.Event`` backed by hipEvents, ``torch.cuda._sleep`` a clock loop), so
the timing protocol is the CUDA adapter's; what differs is the pinning variable, the
fingerprint, the peaks and the size of the cache to flush.

The spin's rate is measured on the device (``spin_rate``), so whichever counter HIP's clock
loop reads, a spin lasts what the timer asked for.

Not yet measured on an AMD device: the peak table is datasheet numbers and the flush sizes
follow the published cache sizes.
"""

from __future__ import annotations

from typing import Any

import torch

from .cuda import L2_FLUSH_BYTES, CudaBackend, first_line
from .port import DevicePeaks

# Public datasheet numbers (OAM parts, dense, no sparsity): HBM GB/s, FP32 vector GFLOPS,
# FP16/BF16 matrix GFLOPS. Keys are matched in order against the device name torch reports
# ("AMD Instinct MI300X"): a key that contains another comes first.
PEAKS: dict[str, DevicePeaks] = {
    "MI355X": DevicePeaks("MI355X", 8000.0, 157_300.0, 2_516_600.0),
    "MI350X": DevicePeaks("MI350X", 8000.0, 144_200.0, 2_307_000.0),
    "MI325X": DevicePeaks("MI325X", 6000.0, 163_400.0, 1_307_400.0),
    "MI300X": DevicePeaks("MI300X", 5300.0, 163_400.0, 1_307_400.0),
    "MI300A": DevicePeaks("MI300A", 5300.0, 122_600.0, 980_600.0),
    "MI250X": DevicePeaks("MI250X", 3276.8, 47_900.0, 383_000.0),
    "MI250": DevicePeaks("MI250", 3276.8, 45_300.0, 362_100.0),
    "MI210": DevicePeaks("MI210", 1638.4, 22_600.0, 181_000.0),
}

# Bytes written to evict the device's caches before a trial: twice the largest cache a
# trial's data could stay in. MI300-series and later parts have a 256 MB Infinity Cache
# behind their L2s; MI200-series parts have 8 MB of L2 per die and no such cache.
FLUSH_BYTES: dict[str, int] = {
    "MI355": 512 * 1024 * 1024,
    "MI350": 512 * 1024 * 1024,
    "MI325": 512 * 1024 * 1024,
    "MI300": 512 * 1024 * 1024,
}


def flush_bytes_for(device_name: str) -> int:
    up = device_name.upper()
    for key, size in FLUSH_BYTES.items():
        if key in up:
            return size
    return L2_FLUSH_BYTES


class RocmBackend(CudaBackend):
    name = "rocm"
    # ROCR filters what the whole ROCm stack sees (HSA included), so a candidate cannot reach
    # another device by any runtime; HIP/CUDA variables would index into that list.
    visibility_variables = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    environment_prefixes = ("HIP_", "HSA_", "ROCM_", "ROCR_", "AMD_")
    clock = "hip events behind a spin kernel + device synchronize; host enqueue time apart"
    peak_table = PEAKS

    def available(self) -> bool:
        return torch.version.hip is not None and bool(torch.cuda.is_available())

    def l2_flush_buffer(self, device: Any) -> torch.Tensor:
        size = flush_bytes_for(torch.cuda.get_device_properties(device).name)
        return torch.empty(size // 4, dtype=torch.int32, device=device)

    def fingerprint(self, device: Any) -> dict[str, str]:
        fp = super().fingerprint(device)
        props = torch.cuda.get_device_properties(device)
        fp["gcn_arch"] = str(getattr(props, "gcnArchName", "unknown"))
        fp.pop("compute_capability", None)  # CUDA's notion; the gcn arch says it here
        return fp

    def _toolkit(self) -> dict[str, str]:
        return {"hip": str(torch.version.hip)}

    def _driver(self) -> str:
        return (first_line("/sys/module/amdgpu/version") or "").strip()[:80] or "unknown"
