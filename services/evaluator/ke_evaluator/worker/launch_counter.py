"""Counting (and optionally suppressing) the candidate's own Triton kernel launches.

Every launch, ``kernel[grid](...)``, plain or through ``@triton.autotune`` /
``@triton.heuristics``, ends in ``<JIT class>.run(*args, grid=..., warmup=...)``. In
interpreter mode (TRITON_INTERPRET=1) the class is ``triton.runtime.interpreter.
InterpretedFunction``; on GPU it is ``triton.runtime.jit.JITFunction``. Wrapping ``run`` at
class level (checked empirically with triton 3.7.1 in both modes) sees every launch and
the Python function behind it, so we can tell the candidate's kernels (defined in the
candidate module) from anyone else's.

Suppression mode replaces each candidate launch by a NaN-fill of the tensor arguments
that are not protected (inputs and parameters): the outputs the kernel would have written.
If the candidate's result still matches the reference, the kernels did no needed work.
Bool arguments (masks, comparison results) are filled with ``LaunchRecorder.bool_fill``
when set: no bool value is wrong the way NaN is, so the probe runs with True and with False
(a one-element comparison output left as the allocator gave it was right half the time);
integer arguments are left alone (an index filled with anything may address out of bounds).
The fills also reach what the kernel only reads and the candidate keeps across calls (a
weight packed once and cached, a constant table): ``LaunchRecorder.restore`` puts back
what they overwrote in every tensor still alive, so that the probe leaves the candidate
as it found it.
Audit mode hands every candidate launch to ``arithmetic_audit`` (what it writes, against
what it was given). Warm-up mode (``precompile``'s dry run) compiles each own launch
without launching it.
Worker side: imports torch and triton only.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from .memory import HOST_SPILL_BYTES, copy_to
from .tolerance import chunks


@dataclass
class KernelStats:
    launches: int = 0
    registers: int = 0
    spills: int = 0
    shared_bytes: int = 0


@dataclass
class LaunchRecorder:
    module_name: str | None = None  # the candidate module whose kernels count
    suppress: bool = False
    bool_fill: bool | None = None  # suppression: the value bool arguments get (None: untouched)
    protected: list[tuple[int, int]] = field(default_factory=list)
    own: dict[str, KernelStats] = field(default_factory=dict)
    foreign: dict[str, int] = field(default_factory=dict)
    # arithmetic_audit.ArithmeticAudit: every own launch goes through it (a probe run)
    audit: Any = None
    # CUDA graph replays in this recording, and the launches of the candidate's own kernels
    # they stand for (graph_ledger.py)
    graph_replays: int = 0
    replayed_launches: int = 0
    # a dry run (precompile.py): own launches become Triton warm-ups (compiled, never
    # launched), counted here by kernel; any other launch raises (its tensors may be meta)
    warm_up: bool = False
    warmed: dict[str, int] = field(default_factory=dict)
    # suppression: what each NaN-fill overwrote, for ``restore`` (dropped with its tensor)
    overwritten: dict[int, _Overwritten] = field(default_factory=dict)

    def restore(self) -> None:
        """Put back what suppression's NaN-fills overwrote, in every filled tensor still
        alive (newest fill first, so the values from before the first fill stay).

        The fills are the probe's, not the candidate's: a cache it keeps across calls would
        hold NaN for every later call. The synthesizer's convolutions pack their weight once
        per weight version; with that packed weight filled by the kernel-dependency probe,
        every later forward computed NaN, and the arithmetic audit that runs next saw NaN
        written over NaN (or, through a ReLU, the residual input alone) and rejected honest
        convolution seeds as moves (H100, 2026-11-28)."""
        saved, self.overwritten = self.overwritten, {}
        with torch.no_grad():
            for key in sorted(saved, reverse=True):
                ow = saved.get(key)  # a tensor freed meanwhile took its copy along
                if ow is None:
                    continue
                root = ow.root()
                if root is None:
                    continue
                try:
                    torch.as_strided(root, ow.size, ow.stride, ow.offset).copy_(ow.values.to(root.device))
                except RuntimeError:  # its storage was resized meanwhile: it keeps what it holds
                    pass

    def total_own(self) -> int:
        return sum(k.launches for k in self.own.values())

    def reset(self) -> None:
        self.own.clear()
        self.foreign.clear()
        self.graph_replays = self.replayed_launches = 0


@dataclass
class _Overwritten:
    root: weakref.ref[torch.Tensor]  # the filled tensor, or the base it is a view of
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    values: torch.Tensor  # what the fill overwrote (on the host from HOST_SPILL_BYTES)


_fills = itertools.count()  # keys of the saved fills, in fill order
_state = threading.local()
_installed: list[str] = []


def current() -> LaunchRecorder | None:
    return getattr(_state, "recorder", None)


def current_capture() -> Any:
    """The CUDA graph capture in progress on this thread (``graph_ledger.Captured``), if any."""
    return getattr(_state, "capture", None)


def set_capture(capture: Any) -> None:
    _state.capture = capture


class recording:
    """Context manager: count launches of ``module_name``'s kernels while active (None:
    count nothing)."""

    def __init__(self, recorder: LaunchRecorder | None) -> None:
        self.recorder = recorder
        self._prev: LaunchRecorder | None = None

    def __enter__(self) -> LaunchRecorder | None:
        self._prev = current()
        _state.recorder = self.recorder
        return self.recorder

    def __exit__(self, *exc: object) -> None:
        _state.recorder = self._prev


def capturing() -> bool:
    """Whether the current CUDA stream is being captured into a graph."""
    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    st = t.untyped_storage()
    return st.data_ptr(), st.data_ptr() + st.nbytes()


def _poison_args(args: tuple[Any, ...], kwargs: dict[str, Any], protected: list[tuple[int, int]],
                 saved: dict[int, _Overwritten] | None = None, bool_fill: bool | None = None) -> None:
    for a in list(args) + list(kwargs.values()):
        if not isinstance(a, torch.Tensor) or not a.numel():
            continue
        filled = a.is_floating_point() or (a.dtype == torch.bool and bool_fill is not None)
        if filled:
            lo, hi = _storage_span(a)
            if any(lo < p_hi and p_lo < hi for p_lo, p_hi in protected):
                continue
            if saved is not None:
                _save(a, saved)
            with torch.no_grad():
                a.fill_(float("nan") if a.is_floating_point() else bool(bool_fill))


def _save(a: torch.Tensor, saved: dict[int, _Overwritten]) -> None:
    """Keep what a fill of ``a`` overwrites while ``a`` (or its base) lives: a tensor the
    forward frees takes its copy along, so that the copies held never exceed the memory
    the forward itself holds (large ones wait on the host, as the audit's snapshots do)."""
    root = a._base if a._base is not None else a
    size, stride, offset = tuple(a.shape), tuple(a.stride()), int(a.storage_offset())
    for ow in list(saved.values()):
        if ow.root() is root and (ow.size, ow.stride, ow.offset) == (size, stride, offset):
            return  # filled before in this forward: the older copy is the one to put back
    if _all_nan(a):
        return  # the fill changes nothing: a fresh output from the NaN-poisoned allocator
    host = a.device.type != "cpu" and a.numel() * a.element_size() >= HOST_SPILL_BYTES
    values = copy_to(a, "cpu") if host else a.detach().clone()  # staged: memory.staged_copy
    key = next(_fills)

    def forget(_: object, k: int = key) -> None:
        saved.pop(k, None)

    saved[key] = _Overwritten(weakref.ref(root, forget), size, stride, offset, values)


def _all_nan(a: torch.Tensor) -> bool:
    """Read in pieces: a copy of a large fresh output would wait on the host for nothing."""
    if not a.is_floating_point():
        return False  # a bool fill: kept (what it overwrote is put back)
    return all(bool(torch.isnan(x).all()) for _, (x,) in chunks([a.detach()]))


def _wrap(cls: type) -> None:
    orig = cls.run  # type: ignore[attr-defined]

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = current()
        if rec is None or kwargs.get("warmup"):
            return orig(self, *args, **kwargs)
        fn = getattr(self, "fn", None)
        mod = getattr(fn, "__module__", None)
        name = getattr(fn, "__name__", type(self).__name__)
        mine = rec.module_name is not None and mod == rec.module_name
        if rec.warm_up:
            if not mine:
                raise RuntimeError(f"dry run: launch of {mod}.{name}, not a kernel of the candidate")
            rec.warmed[name] = rec.warmed.get(name, 0) + 1
            return orig(self, *args, **{**kwargs, "warmup": True})
        cap = current_capture()
        if cap is not None:  # recorded into a CUDA graph, not executed: counted when it replays
            book = cap.own if mine else cap.foreign
            book[name] = book.get(name, 0) + 1
        if not mine:
            if cap is None:
                rec.foreign[name] = rec.foreign.get(name, 0) + 1
            return orig(self, *args, **kwargs)
        stats = rec.own.setdefault(name, KernelStats())
        stats.launches += cap is None
        if rec.audit is not None:
            return rec.audit.on_launch(self, orig, args, kwargs, name, cap is not None or capturing())
        if rec.suppress:
            # inside a graph capture the fill is recorded, not run: nothing to save yet
            _poison_args(args, kwargs, rec.protected, None if cap is not None or capturing() else rec.overwritten,
                         rec.bool_fill)
            return None
        result = orig(self, *args, **kwargs)
        # GPU: run() returns the CompiledKernel; its metadata tells registers/spills/shared.
        if result is not None and not stats.registers:
            stats.registers = int(getattr(result, "n_regs", 0) or 0)
            stats.spills = int(getattr(result, "n_spills", 0) or 0)
            meta = getattr(result, "metadata", None)
            stats.shared_bytes = int(getattr(meta, "shared", 0) or 0)
        return result

    run.__wrapped__ = orig  # type: ignore[attr-defined]
    cls.run = run  # type: ignore[attr-defined]


def install() -> list[str]:
    """Wrap the JIT launch entry points once per process. Returns what was wrapped."""
    if _installed:
        return list(_installed)
    try:
        from triton.runtime.jit import JITFunction

        _wrap(JITFunction)
        _installed.append("triton.runtime.jit.JITFunction.run")
    except (ImportError, AttributeError):
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        _wrap(InterpretedFunction)
        _installed.append("triton.runtime.interpreter.InterpretedFunction.run")
    except (ImportError, AttributeError):
        pass
    return list(_installed)


def skip_autotune_benchmarks() -> bool:
    """Interpreter mode only: let ``@triton.autotune`` pick its first (pruned) config.

    Triton's autotuner times every config with the device driver, which does not exist
    under TRITON_INTERPRET=1 ("0 active drivers"), and interpreter timings would mean
    nothing anyway. Every config still has to be correct; on GPU autotuning is untouched.
    """
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        return [1.0, 1.0, 1.0]  # all equal: min() keeps the first config

    Autotuner._bench = _bench  # type: ignore[method-assign]
    return True
