"""One registry of device backends, chosen by name or by a settings ``hardware_kind``.

Built in: ``cuda`` (kinds ``nvidia``, ``nvidia-*``), ``rocm`` (``amd``, ``amd-*``) and
``cpu`` (``cpu``, ``x86``, the Triton interpreter). From outside the package, either

- ``register_backend("npu", NpuBackend, kinds=("acme",))`` in the process that builds the
  Judge: the factory must be a module-level name, because each worker is a fresh process
  that imports it again (the Judge passes ``module:name`` and the module's source root to
  the worker), or
- an installed distribution's entry point in the group ``kernelevolve.device_backends``
  (``npu = "acme_backend:NpuBackend"``), found by every process alike.

Kinds match exactly or as a prefix before a dash ("nvidia" matches "nvidia-h100"). A kind
no backend claims stays a pool label judged on the CPU (``judge/options.py``).
Stdlib only at import: adapters (and torch) load when a backend is first asked for.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from dataclasses import dataclass
from importlib import metadata

from kernelevolve.errors import InvalidArgumentError

from .port import BackendFactory, DeviceBackend

ENTRY_POINT_GROUP = "kernelevolve.device_backends"


@dataclass(frozen=True)
class Registration:
    name: str
    target: str  # "module:attribute" of the factory, importable in a worker
    kinds: tuple[str, ...] = ()
    # Source root a worker adds to its path to import ``target``; "" when the worker's own
    # path (the evaluator's packages, installed distributions) already finds it.
    path: str = ""
    factory: BackendFactory | None = None


_BUILTIN = (
    Registration("cuda", "ke_evaluator.backends.cuda:CudaBackend", ("nvidia",)),
    Registration("rocm", "ke_evaluator.backends.rocm:RocmBackend", ("amd",)),
    Registration("cpu", "ke_evaluator.backends.cpu:CpuInterpreterBackend", ("cpu", "x86")),
)
_lock = threading.Lock()
_registry: dict[str, Registration] = {r.name: r for r in _BUILTIN}
_instances: dict[str, DeviceBackend] = {}
_entry_points_loaded = False


def register_backend(name: str, factory: BackendFactory, *, kinds: tuple[str, ...] = ()) -> None:
    """Make ``factory`` (a module-level class or function) the backend ``name``, chosen
    for the settings hardware kinds ``kinds`` too. Replaces a backend of that name."""
    module = getattr(factory, "__module__", "")
    qualname = getattr(factory, "__qualname__", "")
    if not module or not qualname or "<" in qualname:
        raise InvalidArgumentError(f"backend {name!r}: the factory must be a module-level name (workers import it)")
    with _lock:
        _registry[name] = Registration(name, f"{module}:{qualname}", tuple(kinds), _source_root(module), factory)
        _instances.pop(name, None)


def unregister_backend(name: str) -> None:
    """Remove a backend registered from outside (builtins come back)."""
    with _lock:
        _registry.pop(name, None)
        _instances.pop(name, None)
        for builtin in _BUILTIN:
            if builtin.name == name:
                _registry[name] = builtin


def registration(name: str) -> Registration:
    _load_entry_points()
    with _lock:
        found = _registry.get(name)
    if found is None:
        raise InvalidArgumentError(f"no device backend {name!r} (known: {', '.join(names())})")
    return found


def names() -> list[str]:
    _load_entry_points()
    with _lock:
        return sorted(_registry)


def get_backend(name: str) -> DeviceBackend:
    """The backend ``name`` (one instance per process)."""
    reg = registration(name)
    with _lock:
        inst = _instances.get(name)
    if inst is None:
        inst = (reg.factory or load_target(reg.target))()
        with _lock:
            inst = _instances.setdefault(name, inst)
    return inst


def backend_for_kind(kind: str) -> str | None:
    """The backend name a settings hardware kind means; None when no backend claims it."""
    _load_entry_points()
    with _lock:
        regs = list(_registry.values())
    for reg in regs:
        for k in reg.kinds:
            if kind == k or kind.startswith(k + "-"):
                return reg.name
    return None


def load_target(target: str, path: str = "") -> BackendFactory:
    """Import ``module:attribute`` (``path`` first added to ``sys.path``)."""
    module, _, attr = target.partition(":")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    obj: object = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvalidArgumentError(f"device backend target {target!r} is not callable")
    return obj  # type: ignore[return-value]


def _source_root(module: str) -> str:
    """The directory a worker must have on its path to import ``module``."""
    top = sys.modules.get(module.split(".")[0])
    file = getattr(top, "__file__", None)
    if not file:
        return ""
    root = os.path.dirname(os.path.abspath(file))
    if os.path.basename(file) == "__init__.py":
        root = os.path.dirname(root)
    return root


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    found = [Registration(ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
    with _lock:
        for reg in found:
            kinds = (reg.name,)
            _registry.setdefault(reg.name, Registration(reg.name, reg.target, kinds))
        _entry_points_loaded = True


def for_torch_device(device: object) -> DeviceBackend:
    """The builtin backend of a ``torch.device`` or device type (a HIP build's "cuda" is
    ROCm), for callers that hold a device and no backend."""
    if getattr(device, "type", device) != "cuda":
        return get_backend("cpu")
    import torch

    return get_backend("rocm" if torch.version.hip is not None else "cuda")
