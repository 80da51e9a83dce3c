"""Which GPU each evaluation worker gets, on a host with several.

One evaluator process serves a whole host: its Judge keeps one sandboxed worker per GPU
(more if asked, round robin), and each worker starts with its device backend's visibility
variable (``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``: ``ke_evaluator.backends``) set to
its GPU alone, so inside the worker that GPU is ``cuda:0`` and a candidate cannot reach
another. Timing needs only its own device to itself, so each GPU has its own device lock.

Stdlib only: imported by the Judge, which must load with torch + triton + numpy +
protobuf alone.
"""

from __future__ import annotations

from kernelevolve.errors import InvalidArgumentError


def visible_gpus(cuda_visible_devices: str | None, device_count: int) -> list[str]:
    """The GPUs this process may hand out, as entries of its visibility variable
    (``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``).

    ``cuda_visible_devices`` is the process's own variable (None when unset: every device
    the driver counts, ``0..device_count-1``). Entries may be indices or UUIDs
    (``GPU-…``, ``MIG-…``); CUDA ignores everything from the first invalid entry on, and
    so do we: an empty entry ends the list.
    """
    if cuda_visible_devices is None:
        return [str(i) for i in range(max(0, device_count))]
    out: list[str] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry or entry == "-1":
            break
        out.append(entry)
    return out[:device_count] if device_count >= 0 else out


def select_gpus(setting: str, visible: list[str]) -> list[str]:
    """``setting``: ``""`` (the first visible GPU only, one device per evaluator),
    ``"all"`` (every visible GPU), or a comma list of visible entries (``"0,2"``)."""
    setting = setting.strip()
    if not visible:
        return []
    if not setting:
        return visible[:1]
    if setting == "all":
        return list(visible)
    chosen = [g.strip() for g in setting.split(",") if g.strip()]
    unknown = [g for g in chosen if g not in visible]
    if unknown:
        raise InvalidArgumentError(f"GPUs {unknown} are not visible to this process (visible: {visible})")
    if len(set(chosen)) != len(chosen):
        raise InvalidArgumentError(f"GPU list {setting!r} names a GPU twice")
    return chosen


def pin_workers(gpus: list[str], workers: int) -> list[str]:
    """The GPU of each worker slot: at least one worker per GPU, extra workers round robin,
    so slot i always gets the same GPU (its spare and replacements too)."""
    if not gpus:
        raise InvalidArgumentError("no GPU to pin workers to")
    n = max(workers, len(gpus))
    return [gpus[i % len(gpus)] for i in range(n)]
