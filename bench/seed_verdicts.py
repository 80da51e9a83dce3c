"""The judge's verdict on every example's default (seed) candidate at GPU size: the check
that the offline synthesizer yields a correct kernel for every example on the device, with
the full correctness protocol (the CPU suite checks the same at interpreter sizes).

    python bench/seed_verdicts.py --out DIR [--specs a,b|all] [--parallel 8]

Lowering runs in a pool of host processes; judging in ``--parallel`` sandboxed workers
sharing the GPU. Writes DIR/seed_verdicts.json and prints every non-correct verdict.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import common
from common import fingerprint, write_json


def _lower(args: tuple[str, int]) -> dict[str, Any]:
    """Child process: the spec at GPU size and its seed candidate (no device work)."""
    name, target = args
    try:
        from profile_seeds import _seed_source

        scale, source, cand_source, genome = _seed_source(name, target)
        return {"spec": name, "scale": scale, "source": source, "cand_source": cand_source, "genome": genome}
    except Exception:
        return {"spec": name, "lower_error": traceback.format_exc()[-600:]}


def _judge_one(judge: Any, prep: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"spec": prep["spec"], "scale": prep.get("scale")}
    if "lower_error" in prep:
        row.update(status="lower_error", reason=prep["lower_error"])
        return row
    row.update(common.verdict_row(judge, prep["spec"], prep["source"], prep["cand_source"]))
    row.pop("evidence_keys", None)
    if row["status"] != "correct":
        row["genome"] = prep["genome"]  # to reproduce it
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    common.add_example_arguments(ap)
    ap.add_argument("--parallel", type=int, default=8, help="judge workers sharing the GPU")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a smoke run of this script")
    args = ap.parse_args()
    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions

    names = common.example_names(args.specs)
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        preps = pool.map(_lower, [(n, args.target_elements) for n in names])
    lowered_s = time.perf_counter() - t0
    print(f"{len(preps)} seeds lowered in {lowered_s:.0f}s", flush=True)
    # Full correctness protocol; fewer timing trials: the speedup here is only indicative.
    opts = EvalOptions(device=args.device, timing=TimingOptions(max_trials=30), parallel_workers=args.parallel)
    with Judge(opts) as judge, ThreadPoolExecutor(max_workers=args.parallel) as ex:
        rows = list(ex.map(lambda p: _judge_one(judge, p), preps))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    result = {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "specs": len(rows),
              "statuses": counts, "lowered_s": lowered_s, "seconds": time.perf_counter() - t0, "rows": rows}
    write_json(args.out / "seed_verdicts.json", result)
    for r in rows:
        if r["status"] != "correct":
            print(f"  {r['spec']:<28} {r['status']:<14} {r['reason'][:300]!r}")
    print(f"statuses {counts} over {len(rows)} specs in {result['seconds']:.0f}s; {fingerprint()}")


if __name__ == "__main__":
    main()
