"""Several GPUs of one host: the same fixed set of candidates judged with the evaluator's
workers pinned one per GPU, on 1, 2, ... GPUs, through the product's own configuration
(``EvaluatorSettings.gpus`` as ``KE_EVALUATOR_GPUS`` sets it, ``host_gpus`` and
``options_from_settings``, exactly as the evaluator service builds its Judge).

    python bench/multi_gpu.py --out DIR [--counts 1,2] [--specs a,b] [--per-spec 8] [--workers-per-gpu 4]

Per GPU count: candidates judged per minute (the Judge's start-up, each spec's validation
included, apart and included),
scaling efficiency against one GPU, whether every verdict equals the one-GPU run's
(correct or not, and the status), and two checks of the pinning from the verdicts alone:
each verdict's fingerprint names the physical card (``device_uuid``) its worker was pinned
to, and no job held a GPU's device lock exclusively (timing) while another job held that
GPU's lock (the holds every verdict records, on the host's monotonic clock).
DIR/multi_gpu.json is rewritten after every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

from common import fingerprint, write_json  # noqa: E402
from eval_throughput import make_candidates  # noqa: E402

DEFAULT_SPECS = ("relu_scale_add", "gelu_tanh_chain", "softmax_rows", "layernorm", "row_sum", "rmsnorm",
                 "linear_bias_relu", "silu_clamp_mul", "conv2d_bias_relu", "attention_plain")


def timing_clashes(holds: list[tuple[str, str, str, float, float]]) -> list[dict[str, Any]]:
    """Holds ``(gpu, job, mode, start, end)`` of the GPUs' device locks: every exclusive hold
    (timing) that intersects another job's hold of the same GPU's lock (none is expected)."""
    out = []
    for gpu, job, mode, a0, a1 in holds:
        if mode != "exclusive":
            continue
        for gpu_b, job_b, mode_b, b0, b1 in holds:
            if gpu_b == gpu and job_b != job and b0 < a1 and a0 < b1:
                out.append({"gpu": gpu, "timing": [job, a0, a1], "other": [job_b, mode_b, b0, b1]})
    return out


def judge_all(cands: list[dict[str, str]], gpus: str, per_gpu: int) -> dict[str, Any]:
    from ke_evaluator.judge import EvalJob, Judge, options_from_settings
    from ke_evaluator.judge.options import host_gpus
    from kernelevolve.config import EvaluatorSettings

    settings = EvaluatorSettings(hardware_kind="nvidia", gpus=gpus)
    pinned = host_gpus(settings, "nvidia")
    settings = dataclasses.replace(settings, parallel_workers=per_gpu * max(1, len(pinned)))
    t0 = time.perf_counter()
    with Judge(options_from_settings(settings, gpus=pinned)) as judge:
        judge.warm_up()
        # Each spec validated once first, as a session's spec is before its search: the
        # validation's size estimate lets a spec's first job share its GPU. Unvalidated, every
        # spec's first job ran alone on its GPU (2026-11-28: 1 to 4 GPUs gave 1.6x).
        specs = list(dict.fromkeys(c["spec_source"] for c in cands))
        with ThreadPoolExecutor(max_workers=max(1, len(specs))) as ex:
            checks = list(ex.map(lambda src: judge.validate_spec(src, "bench"), specs))
        startup = time.perf_counter() - t0
        verdicts = judge.evaluate_many([EvalJob(c["spec_source"], c["source"], c["id"]) for c in cands])
    seconds = time.perf_counter() - t0
    rows: dict[str, dict[str, Any]] = {}
    holds: list[tuple[str, str, str, float, float]] = []
    for c, v in zip(cands, verdicts, strict=True):
        worker = v.evidence.get("worker") or {}
        gpu = str(worker.get("gpu"))
        rows[c["id"]] = {"status": v.status, "reason": v.reason[:160], "gpu": gpu,
                         "device_uuid": (v.fingerprint or {}).get("device_uuid"),
                         "candidate_ms": v.candidate_timing.median_ms if v.candidate_timing else None,
                         "wall_s": v.evidence.get("wall_s")}
        for mode, a, b in (v.evidence.get("device_lock") or {}).get("held", []):
            holds.append((gpu, c["id"], mode, a, b))
    clashes = timing_clashes(holds)
    uuids: dict[str, set[str]] = {}
    for r in rows.values():
        if r["device_uuid"]:
            uuids.setdefault(r["gpu"], set()).add(r["device_uuid"])
    return {"gpus": list(pinned), "workers": per_gpu * max(1, len(pinned)), "seconds": round(seconds, 2),
            "specs_not_validated": [c.reason[:200] for c in checks if not c.ok],
            "startup_s": round(startup, 2), "per_minute": round(60 * len(cands) / seconds, 2),
            "warm_per_minute": round(60 * len(cands) / max(1e-9, seconds - startup), 2),
            "uuid_per_pin": {g: sorted(u) for g, u in uuids.items()},
            "one_card_per_pin": all(len(u) == 1 for u in uuids.values())
            and len({next(iter(u)) for u in uuids.values()}) == len(uuids),
            "exclusive_holds": sum(h[2] == "exclusive" for h in holds), "timing_clashes": clashes[:20],
            "verdicts": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--specs", default=",".join(DEFAULT_SPECS))
    ap.add_argument("--per-spec", type=int, default=8)
    ap.add_argument("--counts", default="", help="GPU counts to run, e.g. 1,2 (default: 1, 2, 4, ... up to all)")
    ap.add_argument("--workers-per-gpu", type=int, default=4)
    args = ap.parse_args()
    import torch

    visible = torch.cuda.device_count()
    counts = [int(c) for c in args.counts.split(",") if c] or [n for n in (1, 2, 4, 8, 16) if n <= visible]
    counts = [n for n in counts if n <= visible]
    names = [s for s in args.specs.split(",") if s]
    t0 = time.perf_counter()
    cands = make_candidates(names, args.per_spec)
    print(f"{len(cands)} candidates from {len(names)} specs in {time.perf_counter() - t0:.0f}s; "
          f"{visible} GPUs visible", flush=True)
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "specs": names,
                              "candidates": len(cands), "visible_gpus": visible,
                              "workers_per_gpu": args.workers_per_gpu, "runs": []}
    base: dict[str, Any] | None = None
    for n in counts:
        run = judge_all(cands, ",".join(str(i) for i in range(n)), args.workers_per_gpu)
        if base is None:
            base = run
        same = sum(run["verdicts"][k]["status"] == base["verdicts"][k]["status"] for k in run["verdicts"])
        run.update(count=n, same_verdicts=same,
                   differing=[{"id": k, "one_gpu": base["verdicts"][k]["status"], "here": v["status"],
                               "reason": v["reason"]}
                              for k, v in run["verdicts"].items() if v["status"] != base["verdicts"][k]["status"]],
                   scaling_efficiency=round(run["per_minute"] / (n * base["per_minute"]), 3),
                   warm_scaling_efficiency=round(run["warm_per_minute"] / (n * base["warm_per_minute"]), 3))
        result["runs"].append(run)
        write_json(args.out / "multi_gpu.json", result)
        print(f"{n} GPU(s) {run['gpus']}: {run['seconds']:.1f}s ({run['per_minute']:.1f}/min, "
              f"{run['warm_per_minute']:.1f}/min after a {run['startup_s']:.1f}s start-up), efficiency "
              f"{run['scaling_efficiency']:.2f} (warm {run['warm_scaling_efficiency']:.2f}); same verdicts "
              f"{same}/{len(cands)}; one card per pin {run['one_card_per_pin']}; timing clashes "
              f"{len(run['timing_clashes'])} over {run['exclusive_holds']} exclusive holds", flush=True)
    print(result["fingerprint"])


if __name__ == "__main__":
    main()
