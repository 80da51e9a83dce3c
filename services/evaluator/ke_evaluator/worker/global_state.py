"""Process state a candidate must leave as it found it: precision flags, timers, threads.

Both the reference and the candidate run under the job's precision contract
(``precision.py``: torch's defaults plus the spec's own flags, IEEE float32 or TF32); a
snapshot before the candidate and comparisons after each of its calls catch flag flips,
replaced timing/launch functions and started threads. Worker side: torch + triton only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ..backends.cuda import torch_cuda_timer_objects
from . import isolation, precision

# The worker's device backend's own timing functions (``watch_timers``), beyond the
# ``torch.cuda`` ones every worker watches (a candidate may patch them on any device).
_backend_timers: dict[str, Any] = {}


@dataclass
class GlobalState:
    """What a candidate must leave as it found it."""

    flags: dict[str, str] = field(default_factory=dict)
    py_threads: int = 0
    os_threads: int = 0
    timers: dict[str, int] = field(default_factory=dict)


def set_precision_flags() -> None:
    """Identical numerics for reference and candidate: the running job's precision contract
    (``precision.enter_job``) applied again, after anything that may have moved a flag."""
    precision.apply_job()


def watch_timers(objs: dict[str, Any]) -> None:
    """Add the device backend's timing functions to those a candidate must not replace
    (``DeviceBackend.timer_objects``; once per worker, before the first snapshot)."""
    _backend_timers.update(objs)


def _timer_objects() -> dict[str, Any]:
    objs: dict[str, Any] = {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time,
        "time.monotonic": time.monotonic,
        **torch_cuda_timer_objects(),
        **_backend_timers,
    }
    from triton.runtime.jit import JITFunction

    objs["triton.JITFunction.run"] = JITFunction.run
    try:  # the compile hooks release the device lock (compile_release.py): nobody else's
        from triton import knobs

        objs["triton.knobs.runtime.jit_cache_hook"] = getattr(knobs.runtime, "jit_cache_hook", None)
        objs["triton.knobs.runtime.jit_post_compile_hook"] = getattr(knobs.runtime, "jit_post_compile_hook", None)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        objs["triton.InterpretedFunction.run"] = InterpretedFunction.run
    except ImportError:
        pass
    return objs


def _safe_len(fn: Any) -> int:
    try:
        return int(fn())
    except (AttributeError, RuntimeError):
        return -1


def _global_hook_count() -> int:
    from torch.nn.modules import module as nn_module

    return sum(len(getattr(nn_module, name)) for name in dir(nn_module)
               if name.startswith("_global_") and name.endswith("hooks") and isinstance(getattr(nn_module, name), dict))


def snapshot() -> GlobalState:
    return GlobalState(
        flags={
            # TF32 flags (legacy and torch >= 2.9's per-op slots), cuDNN algorithm choice
            **precision.read_flags(),
            "default_dtype": str(torch.get_default_dtype()),
            "grad_enabled": str(torch.is_grad_enabled()),
            # A mode left active, or a global module hook, would see and could rewrite the
            # reference's inputs and outputs: the reference must run exactly as written.
            "torch_dispatch_modes": str(_safe_len(lambda: torch._C._len_torch_dispatch_stack())),
            "torch_function_modes": str(_safe_len(lambda: torch._C._len_torch_function_stack())),
            "global_module_hooks": str(_global_hook_count()),
        },
        py_threads=threading.active_count(),
        os_threads=isolation.thread_count(),
        timers={k: id(v) for k, v in _timer_objects().items()},
    )


def state_violations(before: GlobalState, after: GlobalState, count_os_threads: bool = True) -> list[str]:
    """Differences that mean the candidate changed the process. OS threads are counted only
    where nothing legitimate starts them lazily: on CUDA, Triton's compiler and the driver
    start native threads on first use, so there only Python threads count."""
    out: list[str] = []
    for k, v in before.flags.items():
        if after.flags.get(k) != v:
            out.append(f"changed global flag {k}: {v} -> {after.flags.get(k)}")
    for name, ident in before.timers.items():
        if after.timers.get(name) != ident:
            out.append(f"replaced timing/launch function {name}")
    if after.py_threads > before.py_threads:
        out.append(f"started threads ({before.py_threads} -> {after.py_threads} Python threads)")
    elif count_os_threads and before.os_threads >= 0 and after.os_threads > before.os_threads:
        out.append(f"started native threads ({before.os_threads} -> {after.os_threads} OS threads)")
    return out
