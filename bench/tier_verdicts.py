"""Seconds per verdict per tier and per stage: the offline synthesizer's seed for each spec
judged by the product's ``Judge``, first by the full protocol (the spec's first job on the
Judge: it measures the reference's cost and fills the worker's session cache), then
``--screens`` screens and ``--fulls`` more full verdicts of the same candidate, all in one
worker per spec, then a batch of screens over ``--parallel`` workers for verdicts per
GPU-minute.

    python bench/tier_verdicts.py --out DIR [--specs large|a,b] [--screens 4] [--fulls 1] [--parallel 8]
    python bench/tier_verdicts.py --device cpu --specs relu_scale_add --out DIR     (smoke run)

Per verdict: tier, status, seconds from submission to verdict (``wall_s``), and the
worker's seconds per stage (``evidence["stage_s"]``). Per spec and tier: the medians. Per
tier: verdicts per GPU-minute (one stream: 60 / median seconds; the batch: verdicts /
its wall minutes). DIR/tier_verdicts.json is rewritten after every spec.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

import common  # noqa: E402
from common import fingerprint, write_json  # noqa: E402
from real_size_verdicts import _lower  # noqa: E402


def _verdict(judge: Any, prep: dict[str, Any], tier: str, label: str) -> dict[str, Any]:
    t0 = time.monotonic()
    v = judge.evaluate(prep["source"], prep["cand_source"], f"{prep['spec']}-{label}", tier=tier)
    wall = time.monotonic() - t0
    ev = v.evidence
    cache = ev.get("reference_cache") or {}
    return {"spec": prep["spec"], "label": label, "tier": v.tier, "status": v.status, "reason": v.reason[:200],
            "seconds": round(wall, 3), "stage_s": ev.get("stage_s") or {}, "speedup": round(v.speedup, 4),
            "trials": v.candidate_timing.trials if v.candidate_timing else 0,
            "baseline": (ev.get("timing") or {}).get("baseline", ""),
            "reference_outputs": cache.get("reference_outputs", ""),
            # where the screen set's eager output went after this job (device or host, and why)
            "screen_reference": cache.get("screen_reference", "")}


def _medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {}
    stages = sorted({k for r in rows for k in r["stage_s"]})
    return {"n": len(rows), "seconds": round(statistics.median(r["seconds"] for r in rows), 3),
            "stage_s": {s: round(statistics.median(r["stage_s"].get(s, 0.0) for r in rows), 3) for s in stages},
            "statuses": sorted({r["status"] for r in rows})}


def run(names: list[str], out: Path, device: str, screens: int, fulls: int, parallel: int, trials: int,
        batch: int, batch_tiers: tuple[str, ...] = ("screen", "full")) -> dict[str, Any]:
    from ke_evaluator.judge import EvalJob, EvalOptions, Judge, TimingOptions

    t0 = time.perf_counter()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M"), "fingerprint": fingerprint(),
                              "device": device, "screens": screens, "fulls": fulls, "rows": [], "specs": {}}
    path = out / "tier_verdicts.json"
    hardware = "cuda" if device == "cuda" else "cpu"
    with mp.get_context("spawn").Pool(2) as pool:
        preps = sorted(pool.imap_unordered(_lower, [(n, hardware) for n in names]),
                       key=lambda p: (p.get("input_bytes") or 0, p["spec"]))
    result["lowered_s"] = round(time.perf_counter() - t0, 1)
    opts = EvalOptions(device=device, timing=TimingOptions(max_trials=trials), parallel_workers=parallel)
    with Judge(opts) as judge:
        for prep in preps:
            if "lower_error" in prep:
                result["specs"][prep["spec"]] = {"lower_error": prep["lower_error"][-300:]}
                continue
            rows = [_verdict(judge, prep, "full", "first-full")]
            rows += [_verdict(judge, prep, "screen", f"screen-{i}") for i in range(screens)]
            rows += [_verdict(judge, prep, "full", f"full-{i}") for i in range(fulls)]
            result["rows"] += rows
            result["specs"][prep["spec"]] = {
                "input_bytes": prep.get("input_bytes"),
                "first_full": _medians(rows[:1]),
                "screen": _medians([r for r in rows if r["tier"] == "screen"]),
                "full_warm": _medians([r for r in rows[1:] if r["tier"] == "full"])}
            s = result["specs"][prep["spec"]]
            print(f"  {prep['spec']:<28} first full {s['first_full'].get('seconds')} s, "
                  f"screen {s['screen'].get('seconds')} s, full {s['full_warm'].get('seconds')} s "
                  f"{[r['status'] for r in rows]}", flush=True)
            result["seconds"] = round(time.perf_counter() - t0, 1)
            write_json(path, result)
        # Verdicts per GPU-minute: a batch of screens (and of full verdicts) of the judged
        # specs, over every worker at once (the specs' caches are warm in their workers).
        ok = [p for p in preps if "lower_error" not in p]
        for tier in batch_tiers:
            if not ok or batch <= 0:
                break
            jobs = [EvalJob(p["source"], p["cand_source"], f"{p['spec']}-batch-{tier}-{i}", tier=tier)
                    for i in range(batch) for p in ok]
            b0 = time.monotonic()
            verdicts = judge.evaluate_many(jobs)
            minutes = (time.monotonic() - b0) / 60
            result[f"batch_{tier}"] = {"verdicts": len(verdicts), "minutes": round(minutes, 3),
                                       "per_gpu_minute": round(len(verdicts) / minutes, 2) if minutes else None,
                                       "statuses": sorted({v.status for v in verdicts})}
            print(f"  batch {tier}: {result[f'batch_{tier}']}", flush=True)
            write_json(path, result)
    for tier in ("screen", "full"):
        per = [r["seconds"] for r in result["rows"] if r["tier"] == tier and r["label"] != "first-full"]
        if per:
            result[f"stream_{tier}_per_gpu_minute"] = round(60 / statistics.median(per), 2)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    write_json(path, result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--specs", default="large", help="large, large+all, or comma-separated example names")
    ap.add_argument("--screens", type=int, default=4, help="screens per spec after its first full verdict")
    ap.add_argument("--fulls", type=int, default=1, help="warm full verdicts per spec after the screens")
    ap.add_argument("--parallel", type=int, default=8, help="judge workers sharing the GPU")
    ap.add_argument("--trials", type=int, default=30, help="timing trials at most per full verdict")
    ap.add_argument("--batch", type=int, default=2, help="jobs per spec and tier in the throughput batch (0: none)")
    ap.add_argument("--batch-tiers", default="screen,full", help="tiers of the throughput batch")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a smoke run of this script")
    args = ap.parse_args()
    names = common.large_names(args.specs)
    result = run(names, args.out, args.device, args.screens, args.fulls, args.parallel, args.trials, args.batch,
                 tuple(t for t in args.batch_tiers.split(",") if t))
    print(f"{len(result['rows'])} verdicts in {result['seconds']:.0f}s; {result['fingerprint']}")


if __name__ == "__main__":
    main()
