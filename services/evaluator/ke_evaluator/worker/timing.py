"""Interleaved baseline/candidate timing with an adaptive trial count.

Protocol: warm up both (compile/autotune outside the timed region); then per round time
the baseline and the candidate back to back (order alternates each round, so drift and
cache state hit both alike). On a GPU each trial flushes L2 by writing a >=256 MB buffer,
then queues a spin kernel (CUDA: ``torch.cuda._sleep``) long enough to cover the host's
enqueue of the call, records device events around the call and synchronizes the whole
device before reading them (the device parts are the backend's, ``ke_evaluator.backends``).
Each sample has two parts measured separately:

- device time (the sample): the events, with the GPU never idle between them (the spin
  keeps it busy while the host enqueues), so host overhead cannot leak in by chance;
- host time: ``perf_counter`` around the call, i.e. the host's cost to enqueue it.

Speedups are ratios of device-time medians; ``max(device, host)`` per sample (the
per-call time of back-to-back calls from one thread) is reported beside them. Why not
one mixed number: without the spin a sample measured either part depending on whether
the L2 flush outlasted the host's enqueue, and the per-call time follows the host,
whose speed differed by up to 2.5x between two worker processes on the same candidate
(H100, 2026-11-22, bench/results/eval_throughput.json): the same small kernel judged
twice differed by 30-70%. On CPU the clock is ``time.perf_counter`` captured
at import (a candidate cannot swap it). Rounds continue until the median's 95% confidence interval (order statistics)
is within +-``ci_target`` of the median for both, or the cap / time budget is hit.
Inputs rotate over several sets with distinct buffers so a cache keyed on pointers or
values of one set does not serve every trial.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..backends import DeviceBackend, for_torch_device

_perf_counter = time.perf_counter  # bound before any candidate code runs
# Spin before each timed call: at least 50 us, twice the host's last enqueue time.
_MIN_SPIN_MS = 0.05
# The spin must outlast the host's enqueue, or the events time the host's gaps too: a
# bidirectional cuDNN LSTM enqueues for 73 ms and runs for 60 ms (H200, 2026-11-28); under a
# 20 ms cap its eager time read 60.5 ms in one judge and 73.9 ms in the next (a 22 %
# disagreement with a fresh-process re-time, bench/agreement.py). Calls this slow to
# enqueue are rare and take that long anyway, so the cap only bounds a runaway.
_MAX_SPIN_MS = 1000.0


@dataclass
class TimingPolicy:
    min_trials: int = 3
    max_trials: int = 10
    ci_target: float = 0.02
    budget_s: float = 30.0
    warmup: int = 1


def median_ci(samples: list[float], z: float = 1.96) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial approximation)."""
    n = len(samples)
    if n == 0:
        return 0.0, 0.0
    s = sorted(samples)
    if n < 3:
        return s[0], s[-1]
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)))
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return s[lo], s[hi]


def summarize(samples: list[float], device_ms: list[float] | None = None,
              host_ms: list[float] | None = None) -> dict[str, Any]:
    """Order statistics of ``samples``; ``device_ms`` / ``host_ms`` (the two parts of each
    CUDA sample) add their medians and the median per-call time max(device, host)."""
    parts = {"device_median_ms": statistics.median(device_ms) if device_ms else 0.0,
             "host_median_ms": statistics.median(host_ms) if host_ms else 0.0,
             "per_call_median_ms": statistics.median(max(d, h) for d, h in zip(device_ms, host_ms, strict=True))
             if device_ms and host_ms else 0.0}
    if not samples:
        return {"median_ms": 0.0, "iqr_ms": 0.0, "ci_low_ms": 0.0, "ci_high_ms": 0.0, "trials": 0,
                "min_ms": 0.0, "samples_ms": [], **parts}
    s = sorted(samples)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = s[-1] - s[0]
    lo, hi = median_ci(s)
    return {
        "median_ms": statistics.median(s),
        "iqr_ms": iqr,
        "ci_low_ms": lo,
        "ci_high_ms": hi,
        "trials": len(s),
        "min_ms": s[0],
        "samples_ms": [round(x, 6) for x in samples],
        **parts,
    }


def ci_tight(samples: list[float], target: float) -> bool:
    if len(samples) < 3:
        return False
    med = statistics.median(samples)
    lo, hi = median_ci(samples)
    return med > 0 and (med - lo) <= target * med and (hi - med) <= target * med


class Timer:
    """One timed call on the given device; see the module docstring for the protocol."""

    def __init__(self, device: torch.device, backend: DeviceBackend | None = None) -> None:
        self.device = device
        self.backend = backend if backend is not None else for_torch_device(device)
        # Device events (else ``perf_counter``); named for the first backend that had them.
        self.cuda = self.backend.accelerated
        self._flush: torch.Tensor | None = None
        self.last_device_ms = 0.0
        self.last_host_ms = 0.0
        self.spin_short = 0  # samples whose host enqueue outlasted the spin (device part suspect)
        if self.cuda:
            self._flush = self.backend.l2_flush_buffer(device)
        self.flushes = self._flush is not None  # whether each trial starts with an evicted cache
        if self.cuda:
            self._sync = self.backend.synchronize
            self._cycles_per_ms = self.backend.spin_cycles_per_ms(device)
        # Per contestant (host costs differ: eager vs a Python launcher), set from warm-up.
        self._spin_ms: dict[int, float] = {}

    def note_host_ms(self, key: int, host_ms: float) -> None:
        """Size contestant ``key``'s spin from a host time seen outside the timed region."""
        self._spin_ms[key] = max(self._spin_ms.get(key, 0.0), _spin_for(host_ms))

    def time_call(self, fn: Callable[[], Any], key: int = 0) -> float:
        if self.cuda:
            spin_ms = self._spin_ms.get(key, _MIN_SPIN_MS)
            if self._flush is not None:
                self._flush.zero_()  # evict L2 so every trial starts cold
            self.backend.spin(int(spin_ms * self._cycles_per_ms))
            events = self.backend.event_timer()
            events.start()
            t0 = _perf_counter()
            fn()
            host = (_perf_counter() - t0) * 1000.0
            events.stop()
            # Device-wide: no work from this sample (side streams are banned statically) can
            # spill into the next one.
            self._sync()
            device = events.elapsed_ms()
            if host > spin_ms:
                self.spin_short += 1
            self._spin_ms[key] = _spin_for(host)
            self.last_device_ms, self.last_host_ms = device, host
            return device
        t0 = _perf_counter()
        fn()
        ms = (_perf_counter() - t0) * 1000.0
        self.last_device_ms = self.last_host_ms = ms
        return ms


def _spin_for(host_ms: float) -> float:
    """Spin before the next call: twice the host time seen (the spin rate drifts with
    clocks), within the bounds."""
    return min(_MAX_SPIN_MS, max(_MIN_SPIN_MS, 2.0 * host_ms))


def interleaved(
    baseline: Callable[[list[Any]], Any],
    candidate: Callable[[list[Any]], Any],
    input_sets: list[list[Any]],
    timer: Timer,
    policy: TimingPolicy,
) -> tuple[list[float], list[float]]:
    base, cand = interleaved_many([baseline, candidate], input_sets, timer, policy)
    return base, cand


def interleaved_many(
    fns: list[Callable[[list[Any]], Any]],
    input_sets: list[list[Any]],
    timer: Timer,
    policy: TimingPolicy,
    refresh: Callable[[int, int], None] | None = None,
    parts: list[tuple[list[float], list[float]]] | None = None,
) -> list[list[float]]:
    """Time each contestant once per round, the starting contestant rotating every round.

    ``refresh(set_index, round)`` runs before each round, outside the timed region: it
    writes new values into that set's buffers so that no two rounds see the same data.
    ``parts``, when given, receives per contestant the (device ms, host ms) lists.
    """
    # Warm-up (compile/autotune, caches) outside the timed region. On CPU the interpreter
    # has nothing to compile per input set, and a call can take seconds: one set suffices.
    warm_sets = input_sets if timer.cuda else input_sets[:1]
    for _ in range(max(0, policy.warmup)):
        for inputs in warm_sets:
            for key, fn in enumerate(fns):
                t0 = _perf_counter()
                fn(inputs)
                timer.note_host_ms(key, (_perf_counter() - t0) * 1000.0)
    if timer.cuda:
        timer.backend.synchronize()
    samples: list[list[float]] = [[] for _ in fns]
    if parts is not None:
        parts[:] = [([], []) for _ in fns]
    t_start = _perf_counter()
    k = 0
    n = len(fns)
    while True:
        inputs = input_sets[k % len(input_sets)]
        if refresh is not None:
            refresh(k % len(input_sets), k)
        for j in range(n):
            idx = (k + j) % n
            samples[idx].append(timer.time_call(functools.partial(fns[idx], inputs), key=idx))
            if parts is not None:
                parts[idx][0].append(timer.last_device_ms)
                parts[idx][1].append(timer.last_host_ms)
        k += 1
        if k >= policy.max_trials:
            break
        if k >= policy.min_trials:
            if all(ci_tight(s, policy.ci_target) for s in samples):
                break
            if _perf_counter() - t_start > policy.budget_s:
                break
    return samples


def compare_medians(a: dict[str, Any] | Any, b: dict[str, Any] | Any) -> str:
    """'faster' / 'slower' when ``a``'s median CI lies entirely below / above ``b``'s, else
    'indistinguishable'. Takes ``verdict.Timing`` objects or their dicts; use it to promote
    an elite only on a difference the noise cannot explain."""

    def ci(t: Any) -> tuple[float, float]:
        d = t if isinstance(t, dict) else t.__dict__
        return float(d["ci_low_ms"]), float(d["ci_high_ms"])

    a_lo, a_hi = ci(a)
    b_lo, b_hi = ci(b)
    if a_hi < b_lo:
        return "faster"
    if a_lo > b_hi:
        return "slower"
    return "indistinguishable"
