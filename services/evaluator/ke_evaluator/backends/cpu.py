"""The host CPU through Triton's interpreter (``TRITON_INTERPRET=1``).

Correctness runs as on a GPU; timing is ``time.perf_counter`` around the interpreted call
and says nothing about GPU speed (the verdict warns so). No peaks, no memory allocator to
ask, no device to synchronize.
"""

from __future__ import annotations

import platform
from collections.abc import MutableMapping
from typing import Any

from .port import DeviceBackend


class CpuInterpreterBackend(DeviceBackend):
    name = "cpu"
    torch_device_type = "cpu"
    accelerated = False
    visibility_variables = ("CUDA_VISIBLE_DEVICES",)

    def available(self) -> bool:
        return True

    def worker_environment(self, env: MutableMapping[str, str], visible: str | None) -> None:
        # The interpreter must be chosen before triton is imported: set it in the child's env;
        # and no GPU for a candidate judged on the host.
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""

    def torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def fingerprint(self, device: Any) -> dict[str, str]:
        return {"device_name": platform.processor() or platform.machine()}
