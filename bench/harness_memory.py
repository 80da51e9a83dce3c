"""The evaluator's own memory per job, phase by phase: one real job of a pointwise spec over
one input of a given shape and dtype (tests/evaluator/memory_specs.py: a correct Triton
candidate, output the size of the input), judged by the product's ``Judge``; prints each
phase's peak as a multiple of one input set + its outputs.

    python bench/harness_memory.py --shape 32768x32768 --dtype float32 [--out FILE]    (a GPU: 4 GiB)
    python bench/harness_memory.py --device cpu --shape 1024x8192 --dtype float32      (the CPU interpreter)

On CUDA the figures are the worker's allocator peaks above what it held before the job
(``evidence["memory"]["job"]["phase_peak_bytes"]``); on the CPU the resident set's
high-water mark (``resident_phase_peak_bytes``; the device is the host there, so copies the
harness keeps on the host count too; use tensors over 32 MiB, below glibc's mmap threshold
freed memory stays resident).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _specs() -> object:
    path = ROOT / "tests" / "evaluator" / "memory_specs.py"
    spec = importlib.util.spec_from_file_location("memory_specs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="1024x8192")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions, WorkerPoolOptions

    specs = _specs()
    shape = tuple(int(x) for x in args.shape.split("x"))
    opts = EvalOptions(device=args.device, correctness_trials=3, compile_timeout_s=600, run_timeout_s=600,
                       timing=TimingOptions(min_trials=3, max_trials=10), pool=WorkerPoolOptions(spare_worker=False))
    with Judge(opts) as judge:
        t0 = time.monotonic()
        v = judge.evaluate(specs.spec(shape, args.dtype), specs.CANDIDATE, candidate_id="harness-memory")  # type: ignore[attr-defined]
        wall = time.monotonic() - t0
    reported = v.evidence.get("memory", {})
    mem = reported.get("job", reported)  # with admission (a GPU) the worker's report is under "job"
    io = int(mem.get("inputs_bytes", 0)) + int(mem.get("outputs_bytes", 0))
    phases = mem.get("phase_peak_bytes") or mem.get("resident_phase_peak_bytes") or {}
    row = {"shape": list(shape), "dtype": args.dtype, "status": v.status, "reason": v.reason[:300],
           "device": v.device, "fingerprint": v.fingerprint, "wall_s": round(wall, 1), "inputs_plus_outputs_bytes": io,
           "phase_multiple": {k: round(b / io, 2) for k, b in phases.items()} if io else {},
           "job_peak_multiple": round(max(list(phases.values()) or [0]) / io, 2) if io else None, "memory": mem}
    print(json.dumps(row, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=1))
    return 0 if v.status == "correct" else 1


if __name__ == "__main__":
    sys.exit(main())
