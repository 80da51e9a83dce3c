"""Interleaved baseline/candidate timing with an adaptive trial count.

Protocol: warm up both (compile/autotune outside the timed region); then per round time
the baseline and the candidate back to back (order alternates each round, so drift and
cache state hit both alike). On CUDA each trial flushes L2 by writing a >=256 MB buffer,
records CUDA events around the call and synchronizes the whole device before reading
them. On CPU the clock is ``time.perf_counter`` captured at import (a candidate cannot
swap it). Rounds continue until the median's 95% confidence interval (order statistics)
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

_perf_counter = time.perf_counter  # bound before any candidate code runs
_L2_FLUSH_BYTES = 256 * 1024 * 1024


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


def summarize(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"median_ms": 0.0, "iqr_ms": 0.0, "ci_low_ms": 0.0, "ci_high_ms": 0.0, "trials": 0,
                "min_ms": 0.0, "samples_ms": []}
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
    }


def ci_tight(samples: list[float], target: float) -> bool:
    if len(samples) < 3:
        return False
    med = statistics.median(samples)
    lo, hi = median_ci(samples)
    return med > 0 and (med - lo) <= target * med and (hi - med) <= target * med


class Timer:
    """One timed call on the given device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush: torch.Tensor | None = None
        if self.cuda:
            self._flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            self._Event = torch.cuda.Event
            self._sync = torch.cuda.synchronize

    def time_call(self, fn: Callable[[], Any]) -> float:
        if self.cuda:
            assert self._flush is not None
            self._flush.zero_()  # evict L2 so every trial starts cold
            start = self._Event(enable_timing=True)
            end = self._Event(enable_timing=True)
            # No host synchronize before ``start``: the GPU is still busy with the flush while
            # the host enqueues the call, so Python launch overhead overlaps it as in a real
            # pipeline (and as triton.testing.do_bench measures). Syncing first exposed that
            # overhead and made small-kernel samples swing by 30-50% between workers
            # (H100, 2026-11-22, bench/results/eval_throughput_before.json).
            start.record()
            fn()
            end.record()
            # Device-wide: no work from this sample (side streams are banned statically) can
            # spill into the next one.
            self._sync()
            return float(start.elapsed_time(end))
        t0 = _perf_counter()
        fn()
        return (_perf_counter() - t0) * 1000.0


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
) -> list[list[float]]:
    """Time each contestant once per round, the starting contestant rotating every round.

    ``refresh(set_index, round)`` runs before each round, outside the timed region: it
    writes new values into that set's buffers so that no two rounds see the same data.
    """
    # Warm-up (compile/autotune, caches) outside the timed region. On CPU the interpreter
    # has nothing to compile per input set, and a call can take seconds: one set suffices.
    warm_sets = input_sets if timer.cuda else input_sets[:1]
    for _ in range(max(0, policy.warmup)):
        for inputs in warm_sets:
            for fn in fns:
                fn(inputs)
    if timer.cuda:
        torch.cuda.synchronize()
    samples: list[list[float]] = [[] for _ in fns]
    t_start = _perf_counter()
    k = 0
    n = len(fns)
    while True:
        inputs = input_sets[k % len(input_sets)]
        if refresh is not None:
            refresh(k % len(input_sets), k)
        for j in range(n):
            idx = (k + j) % n
            samples[idx].append(timer.time_call(functools.partial(fns[idx], inputs)))
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
