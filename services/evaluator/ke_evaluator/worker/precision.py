"""The precision contract inside the worker: read, resolve and apply the float32 flags a
job runs under (``kernelevolve.precision`` names the contracts).

- ``capture_defaults()`` once at start-up, before anything sets a flag: torch's defaults as a
  fresh process has them (cuDNN TF32 on, matmul TF32 off, matmul precision "highest").
- ``import_spec(load)`` around a spec's import: the import starts from those defaults, and
  the flags right after it are the spec's own (a spec that sets
  ``torch.backends.cudnn.allow_tf32 = False`` at import is judged so under ``default``).
- ``enter_job(name, sha)`` resolves the job's contract; ``apply_job()`` (called through
  ``global_state.set_precision_flags``) puts its flags back after anything of ours that may
  move them, and the global-state check compares a candidate's calls against them.

torch >= 2.9 keeps TF32 in per-backend, per-op slots (``fp32_precision``) beside the legacy
flags, and its legacy getters raise once both APIs were used: every reading here is of the
raw slots plus the legacy values where they can be read ("mixed" where torch refuses).
Worker side: torch only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from kernelevolve.precision import (
    CUDNN_BENCHMARK,
    CUDNN_DETERMINISTIC,
    CUDNN_TF32,
    DEFAULT,
    MATMUL_PRECISION,
    MATMUL_TF32,
    Precision,
    check_name,
)

T = TypeVar("T")

# fp32_precision slots, parents first: setting a parent overwrites its children, so a
# restore in this order ends with every slot as read.
_SLOTS: tuple[tuple[str, str], ...] = (
    ("generic", "all"), ("cuda", "all"), ("cuda", "conv"), ("cuda", "rnn"), ("cuda", "matmul"),
    ("mkldnn", "all"), ("mkldnn", "conv"), ("mkldnn", "rnn"), ("mkldnn", "matmul"),
)
MIXED = "mixed"

_defaults: dict[str, str] | None = None
_import_flags: dict[str, dict[str, str]] = {}  # spec sha -> flags right after its import
_job: Precision | None = None  # the running job's contract


def _slots_api() -> bool:
    return hasattr(torch._C, "_get_fp32_precision_getter") and hasattr(torch._C, "_set_fp32_precision_setter")


def _read(fn: Callable[[], Any]) -> str:
    try:
        return str(fn())
    except RuntimeError:  # torch refuses a legacy reading after a mix of the two APIs
        return MIXED


def read_flags() -> dict[str, str]:
    """The float32 numerics of this process, as strings (also what a candidate must leave
    as it found: ``global_state.snapshot``)."""
    flags = {
        MATMUL_TF32: _read(lambda: torch.backends.cuda.matmul.allow_tf32),
        CUDNN_TF32: _read(lambda: torch.backends.cudnn.allow_tf32),
        MATMUL_PRECISION: _read(torch.get_float32_matmul_precision),
        CUDNN_BENCHMARK: str(bool(torch.backends.cudnn.benchmark)),
        CUDNN_DETERMINISTIC: str(bool(torch.backends.cudnn.deterministic)),
    }
    if _slots_api():
        for backend, op in _SLOTS:
            flags[f"fp32_precision.{backend}.{op}"] = _read(
                functools.partial(torch._C._get_fp32_precision_getter, backend, op))
    return flags


def apply_flags(flags: dict[str, str]) -> None:
    """Put the process in the state ``read_flags`` returned (values torch refused to read
    are left as they are)."""
    # torch >= 2.9 keeps the legacy flags as state of their own beside the slots (a slot
    # written alone leaves a legacy reading "mixed"), and each legacy setter writes slots:
    # the legacy values first, in this order, then the slots exactly as read.
    if flags.get(MATMUL_TF32, MIXED) != MIXED:
        _set_matmul_tf32(flags[MATMUL_TF32] == "True")
    if flags.get(MATMUL_PRECISION, MIXED) != MIXED:
        torch.set_float32_matmul_precision(flags[MATMUL_PRECISION])
    if flags.get(CUDNN_TF32, MIXED) != MIXED:
        _set_cudnn_tf32(flags[CUDNN_TF32] == "True")
    if _slots_api():
        for backend, op in _SLOTS:
            val = flags.get(f"fp32_precision.{backend}.{op}", MIXED)
            if val != MIXED:
                torch._C._set_fp32_precision_setter(backend, op, val)
    for key, attr in ((CUDNN_BENCHMARK, "benchmark"), (CUDNN_DETERMINISTIC, "deterministic")):
        if key in flags:
            setattr(torch.backends.cudnn, attr, flags[key] == "True")


def _set_matmul_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on


def _set_cudnn_tf32(on: bool) -> None:
    torch.backends.cudnn.allow_tf32 = on


def capture_defaults() -> dict[str, str]:
    """torch's defaults in this process (once, at start-up, before any job sets a flag)."""
    global _defaults
    if _defaults is None:
        _defaults = read_flags()
    return dict(_defaults)


def import_spec(load: Callable[[], T], sha: str) -> T:
    """Run ``load`` (a spec's import, or its cached module) from torch's defaults; the first
    time spec ``sha`` is loaded, the flags right after the import are recorded as its own."""
    apply_flags(capture_defaults())
    loaded = load()
    if sha not in _import_flags:
        _import_flags[sha] = read_flags()
    return loaded


def named_flags(name: str) -> dict[str, str]:
    """``strict`` / ``tf32`` over torch's defaults: the legacy setters, as users write them."""
    apply_flags(capture_defaults())
    on = name == "tf32"
    torch.set_float32_matmul_precision("high" if on else "highest")
    _set_matmul_tf32(on)
    _set_cudnn_tf32(on)
    return read_flags()


def resolve(name: str, sha: str) -> Precision:
    """Contract ``name`` for spec ``sha`` (already loaded through ``import_spec``):
    ``default`` is the spec's own flags; ``strict`` and ``tf32`` set the TF32 flags and keep
    the spec's cuDNN algorithm choices (``benchmark``, ``deterministic``)."""
    name = check_name(name)
    defaults = capture_defaults()
    own = _import_flags.get(sha, defaults)
    spec_flags = {k: v for k, v in own.items() if defaults.get(k) != v}
    if name == DEFAULT:
        return Precision(name=name, flags=dict(own), spec_flags=spec_flags)
    flags = named_flags(name)
    for key in (CUDNN_BENCHMARK, CUDNN_DETERMINISTIC):
        flags[key] = own.get(key, flags[key])
    return Precision(name=name, flags=flags, spec_flags=spec_flags)


def enter_job(name: str, sha: str) -> Precision:
    """Resolve and apply the running job's contract."""
    global _job
    _job = resolve(name, sha)
    apply_flags(_job.flags)
    return _job


def apply_job() -> None:
    """The running job's flags again (before the first job: IEEE float32, the contract
    spec validation and start-up used before contracts existed)."""
    if _job is None:
        apply_flags(named_flags("strict"))
    else:
        apply_flags(_job.flags)


def current() -> Precision | None:
    return _job
