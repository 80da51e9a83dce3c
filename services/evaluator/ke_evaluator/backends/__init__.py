"""Device backends of the evaluator: the port (``port.py``), its adapters (``cuda``,
``rocm``, ``cpu``) and the registry that picks one by name or hardware kind."""

from __future__ import annotations

from .port import BackendFactory, DeviceBackend, DevicePeaks, EventTimer, match_peaks
from .registry import (
    ENTRY_POINT_GROUP,
    Registration,
    backend_for_kind,
    for_torch_device,
    get_backend,
    names,
    register_backend,
    registration,
    unregister_backend,
)

__all__ = ["ENTRY_POINT_GROUP", "BackendFactory", "DeviceBackend", "DevicePeaks", "EventTimer", "Registration",
           "backend_for_kind", "for_torch_device", "get_backend", "match_peaks", "names", "register_backend",
           "registration", "unregister_backend"]
