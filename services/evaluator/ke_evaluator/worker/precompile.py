"""Compiling a candidate's kernels side by side before its first call (GPU).

A candidate's first call compiles every distinct kernel (and specialisation) it launches
where it launches it, one after another: Triton compiles inside ``JITFunction.run``. A
whole model's seed defines 25-40 kernels (``Kernel economy`` of the offline synthesizer)
at about a second of CPU each, so its compile phase is their sum.

``dry_run`` comes first, inside the compile phase: the candidate's source is imported a
second time (a module of its own: nothing the judged module or model holds is touched),
its ``ModelNew`` is built and its forward called on fake tensors (``FakeTensorMode``: the
device, shapes, strides and dtypes of trial 0's inputs, no data), with every launch of the
dry-run module's own kernels turned into
Triton's ``warmup`` (compile, do not launch) under ``AsyncCompileMode`` (triton >= 3.4,
``triton/runtime/_async_compile.py``): each distinct specialisation is submitted to a pool
of threads while the forward goes on, and the pool is drained and joined at the end. Fake
tensors hold no data: no op reaches the device (no garbage an un-launched kernel left
behind can index out of bounds), host code that reads values (``.item()``) stops the dry
run, whose submitted compiles still finish, and host code that asks where a tensor lives
(``x.is_cuda``: our launchers pick rows per program by it) sees the real device, so the
dry run compiles the specialisations the real call launches (meta tensors would not).
Triton's on-disk cache (``TRITON_CACHE_DIR``, shared by a Judge's workers under its root)
is keyed on the kernel's source, its dependencies, the specialisation and the options, not
on its module's name, so the judged module's first call finds each kernel compiled and only
loads it.

Why the verdict cannot change:

- the dry run is candidate code: it runs in the worker, inside the compile phase's clock
  and CPU budget, in the sandbox, under the device lock (SHARED; Triton's per-compile
  release of the lock, ``compile_release``, is paused while it runs, and the lock is let go
  only while waiting for the pool, when no candidate code runs);
- it never touches the judged module or model (a second import, a second model);
- its errors are recorded (evidence ``precompile``) and dropped: the first real call
  still happens inside the compile phase and is what is judged, and whatever it launches
  that the dry run missed compiles there as before;
- process state it changes (flags, hooks, threads) is caught by the state checks after the
  first real call, whose snapshot is taken before both; the pool's threads are joined
  before that call;
- a candidate with ``@triton.autotune`` kernels of several configs gets no dry run: the
  autotuner would time kernels that do not launch and cache the winner.

On CPU the interpreter compiles nothing: ``auto`` skips the dry run; ``on`` runs it there
too (the interpreter's ``warmup`` does nothing), which is how its logic is tested.
Worker side: torch and triton only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from . import launch_counter, loading

# Threads compiling at once: Triton's passes and ptxas are CPU work; more threads than cores
# only queue (the worker's CPU budget is per core of the host, isolation.set_cpu_budget).
MAX_THREADS = 8


@dataclass
class DryRun:
    """What a dry run did, for the verdict's evidence."""

    status: str = "skipped"  # skipped | done | stopped
    reason: str = ""
    kernels: list[str] = field(default_factory=list)  # own kernels whose launches were warmed, first launch order
    warmed: int = 0  # launches turned into warm-ups
    seconds: float = 0.0

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "seconds": round(self.seconds, 3)}
        if self.reason:
            out["reason"] = self.reason[:300]
        if self.status != "skipped":
            out["kernels"] = self.kernels
            out["warmed_launches"] = self.warmed
        return out


def wanted(mode: str, accelerated: bool) -> str:
    """Why no dry run is wanted, or "" when one is."""
    if mode == "off":
        return "off"
    if mode == "auto" and not accelerated:
        return "interpreter: nothing to compile"
    return ""


def autotuned(module: types.ModuleType) -> list[str]:
    """Names of the module's autotuned kernels with more than one config."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return []
    return sorted(name for name, obj in vars(module).items()
                  if isinstance(obj, Autotuner) and len(getattr(obj, "configs", ())) > 1)


def _fake(mode: FakeTensorMode, x: Any) -> Any:
    """``x`` as a fake tensor (device, shape, strides, dtype; no data), containers walked."""
    if isinstance(x, torch.Tensor):
        return mode.from_tensor(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_fake(mode, v) for v in x)
    return x


@contextlib.contextmanager
def _async_compile(threads: int, accelerated: bool) -> Iterator[ThreadPoolExecutor | None]:
    """Triton's asynchronous compile mode over a pool of ``threads``; the pool is drained and
    its threads joined on exit. Without the mode (old triton, or the interpreter) None."""
    mode_cls: Any = None
    if accelerated:
        try:
            from triton.runtime._async_compile import AsyncCompileMode

            mode_cls = AsyncCompileMode
        except ImportError:
            mode_cls = None
    if mode_cls is None:
        yield None
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ke-precompile") as pool:
        # ignore_errors: a kernel that fails to compile is the first real call's to report
        with mode_cls(pool, ignore_errors=True):
            yield pool


def _call_on_fakes(cls: Any, init: list[Any], inputs: list[Any], device: torch.device,
                   call: Callable[[torch.nn.Module, list[Any]], Any], recorder: launch_counter.LaunchRecorder) -> None:
    """``cls(*init)`` made on ``device`` and called on fake copies of ``inputs``, launches
    recorded (warmed) by ``recorder``. Triton reads a fake tensor's data pointer (0:
    aligned, as real allocations are) for its specialisation, and torch warns on each read.
    The RNG states are restored after: the judged calls draw what they would have drawn."""
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    rng = torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])
    with rng, fake, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with torch.device(device):  # parameters made there (moving fakes refuses to swap)
            model = cls(*init)
        with launch_counter.recording(recorder), torch.no_grad():
            call(model, [_fake(fake, x) for x in inputs])


def dry_run(source: str, module_name: str, directory: str, model_cls_name: str, init: list[Any],
            inputs: list[Any], *, device: torch.device, accelerated: bool,
            call: Callable[[torch.nn.Module, list[Any]], Any],
            unlocked: Callable[[], contextlib.AbstractContextManager[Any]],
            paused: Callable[[], contextlib.AbstractContextManager[Any]],
            threads: int | None = None, clock: Callable[[], float] = time.perf_counter) -> DryRun:
    """Import ``source`` as ``module_name`` (not the judged module's name), build its
    ``model_cls_name`` on fake tensors moved to ``device`` and call it (``call(model,
    inputs)``) on fake copies of ``inputs``, every own kernel launch a warm-up. ``paused``: Triton's
    per-compile lock release held off while candidate code runs; ``unlocked``: the device
    lock let go while only the pool works. Never raises for the candidate's faults."""
    start = clock()
    out = DryRun()
    recorder = launch_counter.LaunchRecorder(module_name=module_name, warm_up=True)
    try:
        mod = loading.import_source(source, module_name, directory)
    except BaseException as exc:  # noqa: BLE001 - the judged import raises it again and reports it
        out.status, out.reason = "stopped", f"import: {type(exc).__name__}: {exc}"
        out.seconds = clock() - start
        return out
    try:
        tuned = autotuned(mod)
        if tuned:
            out.reason = f"autotuned kernels: {', '.join(tuned[:5])}"
            return out
        n = threads or max(1, min(MAX_THREADS, os.cpu_count() or 1))
        pool_cm = _async_compile(n, accelerated)
        stopped = ""
        with paused():
            pool = pool_cm.__enter__()
            try:
                _call_on_fakes(getattr(mod, model_cls_name), init, inputs, device, call, recorder)
            # anything the candidate raises, SystemExit included: the first real call raises
            # it again where it is judged
            except BaseException as exc:  # noqa: BLE001
                stopped = f"{type(exc).__name__}: {exc}"
            finally:
                # the candidate's code is done: only the pool works while the lock is let go
                with unlocked():
                    pool_cm.__exit__(None, None, None)
        out.status = "stopped" if stopped else "done"
        out.reason = stopped or ("" if pool is not None else
                                 "launches warmed one by one: no asynchronous compile (interpreter, or triton < 3.4)")
        out.kernels = list(recorder.warmed)
        out.warmed = sum(recorder.warmed.values())
        return out
    finally:
        _forget(module_name)
        out.seconds = clock() - start


def _forget(module_name: str) -> None:
    """The dry run's module and Triton's registry entries of its kernels (kept per process
    otherwise: one set per job)."""
    sys.modules.pop(module_name, None)
    try:
        from triton.runtime.jit import _triton_jit_function_registry as registry
    except ImportError:
        return
    for key in [k for k in registry if k.startswith(f"{module_name}:")]:
        del registry[key]
