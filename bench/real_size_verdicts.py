"""Operators at the sizes people run them: the judge's verdict on the offline synthesizer's
seed for every spec of examples/large (4-12 GB inputs, 50-layer CNNs, multi-layer
recurrent models), judged by the product's ``Judge`` with ``--parallel`` sandboxed
workers sharing one GPU: does each get a verdict at all, and what does it cost.

    python bench/real_size_verdicts.py --out DIR [--specs large|large+all|a,b] [--parallel 8] [--jobs 2]
    python bench/real_size_verdicts.py --device cpu --specs layernorm --out DIR     (smoke run)

Per spec: the verdict and its reason; the input size (measured on the meta device, nothing
allocated); lowering seconds (the synthesizer's ``propose``, in a host process); the
worker's compile-phase seconds (``evidence["stage_s"]["compile"]``); distinct
``@triton.jit`` kernels in the candidate; seconds from the start of the run to this
spec's verdict (every spec is lowered first, then submitted smallest inputs first); the job's
own peak, whole and per phase, from the verdict (``evidence["memory"]``: the worker's
``max_memory_allocated``); and the peak device memory in use while it was judged, all workers
together (``torch.cuda.mem_get_info`` sampled every 0.2 s, the maximum over the spec's
judging window). DIR/real_size_verdicts.json is
rewritten after every spec, so a run cut short keeps what it measured.

Examples other than examples/large are judged at their GPU size (``get_gpu_inputs`` when
declared, else as written); examples/large is judged as written.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import sys
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

import common  # noqa: E402
from common import fingerprint, write_json  # noqa: E402

_JIT = re.compile(r"^[ \t]*@triton\.jit\b[^\n]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def\s+(\w+)", re.MULTILINE)


def jit_kernels(source: str) -> int:
    """Distinct ``@triton.jit`` functions defined in a candidate's source."""
    return len(set(_JIT.findall(source)))


def _input_bytes(source: str) -> int | None:
    """Bytes of the spec's inputs, from the meta device (nothing allocated)."""
    try:
        from kernelevolve.spec_probe import measure

        return measure(source, forward=False).input_bytes
    except Exception:  # noqa: BLE001 - a size we cannot read is left blank, not fatal
        return None


def _lower(args: tuple[str, str]) -> dict[str, Any]:
    """Host child process: the spec's source and its seed candidate, timed (no device work)."""
    name, hardware = args
    try:
        from ke_synthesizer.offline import OfflineSynthesizer
        from kernelevolve.ports.synthesis import ProposalRequest

        source, large = common.spec_source(name)
        t0 = time.perf_counter()
        prop = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1,
                                                            hardware_kind=hardware))[0]
        return {"spec": name, "large": large, "source": source, "cand_source": prop.source, "genome": prop.genome,
                "lowering_s": round(time.perf_counter() - t0, 3), "input_bytes": _input_bytes(source)}
    except Exception:
        return {"spec": name, "lower_error": traceback.format_exc()[-800:]}


class DeviceMemorySampler:
    """Device-wide memory in use (every process on the GPU), sampled on a thread: the peak
    over any window. Without CUDA it reads nothing and every peak is None."""

    def __init__(self, device: str, period_s: float = 0.2) -> None:
        self._samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._period = period_s
        if device == "cuda":
            self._thread = threading.Thread(target=self._run, name="mem-sampler", daemon=True)

    def _run(self) -> None:
        import torch

        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info()
            self._samples.append((time.monotonic(), total - free))
            self._stop.wait(self._period)

    def __enter__(self) -> DeviceMemorySampler:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def peak_gib(self, start: float, end: float) -> float | None:
        used = [b for t, b in list(self._samples) if start <= t <= end]
        return round(max(used) / 2**30, 2) if used else None


def _row(judge: Any, prep: dict[str, Any], sampler: DeviceMemorySampler, t_start: float) -> dict[str, Any]:
    row: dict[str, Any] = {k: prep.get(k) for k in ("spec", "large", "lowering_s", "input_bytes")}
    if "lower_error" in prep:
        row.update(status="lower_error", reason=prep["lower_error"])
        return row
    row["jit_kernels"] = jit_kernels(prep["cand_source"])
    start = time.monotonic()
    row.update(common.verdict_row(judge, prep["spec"], prep["source"], prep["cand_source"]))
    end = time.monotonic()
    stages = row.get("stage_s") or {}
    row.update(compile_s=stages.get("compile"), judge_s=round(end - start, 3),
               verdict_at_s=round(end - t_start, 3), device_used_peak_gib=sampler.peak_gib(start, end))
    if row["status"] != "correct":
        row["genome"] = prep["genome"]  # to reproduce it
    return row


def run(names: list[str], out: Path, device: str, parallel: int, jobs: int, trials: int,
        run_timeout_s: float | None = None) -> dict[str, Any]:
    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions

    t0, t_start = time.perf_counter(), time.monotonic()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "device": device,
                              "parallel": parallel, "specs": len(names), "rows": []}
    path = out / "real_size_verdicts.json"
    lock = threading.Lock()

    def save(row: dict[str, Any] | None = None) -> None:
        with lock:
            if row is not None:
                result["rows"].append(row)
                if result.get("first_verdict_s") is None:
                    result["first_verdict_s"] = row.get("verdict_at_s")
            counts: dict[str, int] = {}
            for r in result["rows"]:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            result.update(statuses=counts, seconds=round(time.perf_counter() - t0, 1))
            write_json(path, result)

    save()
    hardware = "cuda" if device == "cuda" else "cpu"
    # Full correctness protocol; few timing trials: the speedup here is only indicative.
    opts = EvalOptions(device=device, timing=TimingOptions(max_trials=trials), parallel_workers=parallel)
    if run_timeout_s:
        opts.run_timeout_s = run_timeout_s
    result["limits_s"] = {"compile": opts.compile_timeout_s, "run": opts.run_timeout_s}

    def done(fut: Future[dict[str, Any]], name: str) -> None:
        exc = fut.exception()
        row = fut.result() if exc is None else {"spec": name, "status": "bench_error", "reason": repr(exc)[:600]}
        save(row)
        print(f"  {row['spec']:<30} {row['status']:<14} {str(row.get('reason', ''))[:160]!r}", flush=True)

    # Lowering captures on fake tensors (seconds a spec, few processes at once). Every spec is
    # lowered before any is judged, then submitted smallest inputs first: the judge admits
    # first come, first served, a spec's first job and a 4-8 GiB job run alone, and on
    # 2026-11-28 the specs submitted behind two large ones never started in a 545 s window.
    with DeviceMemorySampler(device) as sampler, Judge(opts) as judge, \
            ThreadPoolExecutor(max_workers=parallel) as ex, mp.get_context("spawn").Pool(jobs) as pool:
        preps = sorted(pool.imap_unordered(_lower, [(n, hardware) for n in names]),
                       key=lambda p: (p.get("input_bytes") or 0, p["spec"]))
        result["lowered_s"] = round(time.perf_counter() - t0, 1)
        futures = []
        for prep in preps:
            fut = ex.submit(_row, judge, prep, sampler, t_start)
            fut.add_done_callback(lambda f, n=prep["spec"]: done(f, n))
            futures.append(fut)
        wait(futures)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--specs", default="large", help="large, large+all, or comma-separated example names")
    ap.add_argument("--parallel", type=int, default=8, help="judge workers sharing the GPU")
    ap.add_argument("--jobs", type=int, default=2, help="host processes lowering seeds (each holds a spec's inputs)")
    ap.add_argument("--trials", type=int, default=30, help="timing trials at most per verdict")
    ap.add_argument("--run-timeout-s", type=float, default=None,
                    help="the judge's run-phase limit (default: the product's); recorded in the result")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a smoke run of this script")
    args = ap.parse_args()
    names = common.large_names(args.specs)
    result = run(names, args.out, args.device, args.parallel, args.jobs, args.trials, args.run_timeout_s)
    print(f"statuses {result['statuses']} over {len(result['rows'])} specs in {result['seconds']:.0f}s; "
          f"{result['fingerprint']}")


if __name__ == "__main__":
    main()
