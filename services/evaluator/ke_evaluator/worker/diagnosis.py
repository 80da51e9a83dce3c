"""Roofline diagnosis: bytes and FLOPs of the operator, achieved rates, bound class.

Bytes = inputs + parameters/buffers + outputs (the minimum traffic of any implementation);
FLOPs from torch's flop formulas (``torch.utils.flop_counter``, the tables behind
``FlopCounterMode``) on the reference (they count matmul/conv-like ops; pointwise ops count
as 0, which is right for bound classification).
Peaks and the profiler's device come from the device backend (``ke_evaluator.backends``).
Worker side: torch only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..backends import DeviceBackend, for_torch_device
from ..backends.cuda import PEAKS
from .output_checks import leaves

# Below this time a GPU op is dominated by launch overhead, not by bytes or FLOPs.
LATENCY_FLOOR_MS = 0.010


# The heavy ops (convolution, matrix products) a candidate may leave to cuDNN / cuBLAS, as
# aten names: at the dispatch level (the reference, under _FlopTotal) and in the profiler's
# op counts (the candidate) each conv / linear / matmul is one call of exactly one of them
# (F.conv2d -> convolution, nn.Linear -> addmm or mm, torch.matmul -> mm or bmm).
HEAVY_OPS = ("aten::convolution", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def tensor_bytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for t in leaves(obj) if isinstance(t, torch.Tensor))


class _FlopTotal(TorchDispatchMode):
    """Total FLOPs of the ops run under it, from torch's own formulas
    (``torch.utils.flop_counter.flop_registry``), decomposing ops that have none, as
    ``FlopCounterMode`` does, minus its per-module table (a total is all we use)."""

    def __init__(self) -> None:
        super().__init__()
        from torch.utils.flop_counter import flop_registry

        self.registry = flop_registry
        self.total = 0
        self.heavy = 0  # calls of HEAVY_OPS


def _flop_total_dispatch(self: _FlopTotal, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
    kwargs = kwargs or {}
    if func not in self.registry and func is not torch.ops.prim.device.default:
        with self:
            r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
    out = func(*args, **kwargs)
    if func.name() in HEAVY_OPS:
        self.heavy += 1
    count = self.registry.get(func._overloadpacket)
    if count is not None:
        self.total += int(count(*args, **kwargs, out_val=out))
    return out


# Set after the class statement on purpose: TorchDispatchMode wraps a ``__torch_dispatch__``
# defined in the class body in ``torch._disable_dynamo``, whose first call imports Dynamo
# and with it Inductor. That import was 3.2 s of the first flop count on an H100 and ~1.3 s
# on a CPU host; nothing here runs under torch.compile, so the guard buys nothing.
_FlopTotal.__torch_dispatch__ = _flop_total_dispatch  # type: ignore[method-assign,assignment]


def count_flops(fn: Callable[[], Any]) -> float:
    return count_work(fn)[0]


def count_work(fn: Callable[[], Any]) -> tuple[float, int]:
    """(FLOPs, calls of HEAVY_OPS) of one call of ``fn``; (0, 0) when counting fails."""
    try:
        with _FlopTotal() as counter:
            fn()
        return float(counter.total), counter.heavy
    except Exception:  # noqa: BLE001 - diagnosis is best effort, never fails a verdict
        return 0.0, 0


def library_share(library_ops: dict[str, int], heavy_ops: int) -> dict[str, int]:
    """How many of the reference's heavy ops (per forward) the candidate leaves to the
    library: its calls of HEAVY_OPS in the profiler's op counts. A candidate may call
    cuDNN / cuBLAS for convolutions and matmuls with Triton kernels around them; the
    report shows the share so a reader sees which candidates did."""
    return {"library_calls": sum(library_ops.get(op, 0) for op in HEAVY_OPS), "heavy_ops": heavy_ops}


def classify(
    *,
    bytes_moved: float,
    flops: float,
    median_ms: float,
    device_type: str,
    device_name: str,
    uses_tensor_cores: bool,
    device_ms: float = 0.0,
    host_ms: float = 0.0,
    backend: DeviceBackend | None = None,
) -> dict[str, Any]:
    """Bound class and roofline share. ``median_ms`` is the per-call time; with
    ``device_ms`` (CUDA events) the rates are the kernels' own, and a host enqueue time
    above the device time marks the call launch-bound whatever its arithmetic intensity."""
    notes: list[str] = []
    backend = backend if backend is not None else for_torch_device(device_type)
    launch_bound = backend.accelerated and host_ms > 0 and device_ms > 0 and host_ms > device_ms
    if device_ms > 0:
        median_ms = device_ms
    peaks = backend.peaks(device_name) if backend.accelerated else None
    # Ridge point: FLOPs per byte where compute and bandwidth limits meet. Without device
    # peaks (CPU interpreter) the H100 ridge is used so the class still guides GPU work.
    ref = peaks or PEAKS["H100"]
    peak_flops = ref.tensor_gflops if uses_tensor_cores else ref.fp32_gflops
    ridge = peak_flops / ref.gbps
    intensity = flops / bytes_moved if bytes_moved else 0.0
    bound = "memory" if intensity < ridge else "compute"
    seconds = median_ms / 1000.0 if median_ms > 0 else 0.0
    gbps = bytes_moved / seconds / 1e9 if seconds else 0.0
    gflops = flops / seconds / 1e9 if seconds else 0.0
    fraction = 0.0
    if peaks is not None and seconds:
        fraction = max(gbps / peaks.gbps, gflops / peak_flops if peak_flops else 0.0)
        ideal_ms = max(bytes_moved / (peaks.gbps * 1e9), flops / (peak_flops * 1e9)) * 1000.0
        if median_ms < LATENCY_FLOOR_MS or (ideal_ms < LATENCY_FLOOR_MS and fraction < 0.1):
            bound = "latency"
            notes.append(f"runtime {median_ms * 1000:.1f} us is near launch latency")
        if fraction > 1.05:
            notes.append(f"achieved {fraction:.2f}x of the roofline limit: audit this timing")
        if launch_bound:
            bound = "latency"
            notes.append(f"host enqueue {host_ms * 1000:.1f} us per call exceeds the device time "
                         f"{device_ms * 1000:.1f} us: launch-bound (fewer launches, leaner launcher code)")
    elif not backend.accelerated:
        notes.append(f"bound class from arithmetic intensity {intensity:.2f} FLOP/B vs H100 ridge {ridge:.1f}; "
                     "no device peaks for interpreted CPU runs")
    else:
        bound = "unknown" if not bytes_moved else bound
        notes.append(f"no peak table entry for device {device_name!r}")
    return {
        "bound": bound,
        "bytes_moved": float(bytes_moved),
        "flops": float(flops),
        "achieved_gbps": gbps,
        "achieved_gflops": gflops,
        "roofline_fraction": fraction,
        "notes": notes,
    }


# Allocation/view/metadata ops: not computation, left out of the library-op report.
_BOOKKEEPING = ("aten::empty", "aten::empty_like", "aten::empty_strided", "aten::view", "aten::reshape",
                "aten::_reshape_alias", "aten::as_strided", "aten::contiguous", "aten::detach", "aten::alias",
                "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::unsqueeze", "aten::squeeze",
                "aten::slice", "aten::select", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg",
                "aten::stride", "aten::size", "aten::numel", "aten::is_nonzero", "aten::item",
                "aten::_local_scalar_dense", "aten::to", "aten::_to_copy", "aten::flatten",
                # The CPU interpreter marshals each tensor argument with these (and a copy_).
                "aten::new_empty", "aten::set_")


def library_time_fraction(
    fn: Callable[[], Any], device_type: str, own_kernels: set[str], backend: DeviceBackend | None = None
) -> tuple[float, dict[str, float], dict[str, int]]:
    """Share of the call's time spent in torch library ops, via the autograd (Kineto) profiler.

    CPU: self CPU time of aten ops / wall time of the call (the interpreter's own work is
    numpy, not aten). CUDA: device time of kernels that are not the candidate's
    Triton kernels / all device time. Returns (fraction, per-kernel device ms on CUDA, torch op call counts).
    """
    try:
        # The autograd profiler under torch.profiler.profile, used directly: the wrapper's
        # first start runs ``hasattr(torch, "_inductor")``, which imports the whole of
        # Inductor: 5.2-6.4 s of every worker's start-up on an H100 (the largest step,
        # evidence["sandbox"]["startup_s"]), 2-5 s on a CPU host, against 0.01 s here.
        from torch.autograd import profiler as autograd_profiler

        backend = backend if backend is not None else for_torch_device(device_type)
        use_device = backend.profiler_device()
        with autograd_profiler.profile(use_cpu=True, use_device=use_device, use_kineto=True) as prof:
            t0 = time.perf_counter()
            fn()
            if use_device is not None:
                backend.synchronize()
            wall_us = (time.perf_counter() - t0) * 1e6
        events = prof.key_averages()
        per_kernel: dict[str, float] = {}
        ops = {e.key: int(e.count) for e in events if e.key.startswith("aten::") and e.key not in _BOOKKEEPING}
        if use_device is not None:
            total = 0.0
            lib = 0.0
            for e in events:
                dev_us = float(getattr(e, "self_device_time_total", 0.0) or 0.0)
                if dev_us <= 0 or e.key.startswith("aten::"):
                    continue  # aten:: rows are CPU-side parents of the kernels counted below
                total += dev_us
                per_kernel[e.key] = per_kernel.get(e.key, 0.0) + dev_us / 1000.0
                if not any(e.key.startswith(k) for k in own_kernels):
                    lib += dev_us
            return (lib / total if total else 0.0), per_kernel, ops
        lib = sum(float(e.self_cpu_time_total) for e in events if e.key.startswith("aten::"))
        return (min(1.0, lib / wall_us) if wall_us > 0 else 0.0), per_kernel, ops
    except Exception:  # noqa: BLE001 - best effort
        return 0.0, {}, {}
