"""Evaluator throughput on a GPU: our Judge (warm sandboxed workers, strict protocol)
against a process-per-candidate harness (bench/baseline_harness.py), on the same
candidates. Also times a few candidates twice to show the spread of our timings.
``--parallel 4,8`` adds runs of the Judge with ``parallel_workers`` 4 and 8 (workers share
the GPU; timing takes it alone) through ``Judge.evaluate_many``.

    python bench/eval_throughput.py --out DIR [--specs a,b,c] [--per-spec N] [--parallel N,M]

Writes DIR/eval_throughput.json and prints a short table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import example_path, fingerprint, gpu_variant, pick_scale, scaled_variant, write_json

DEFAULT_SPECS = ("relu_scale_add", "gelu_tanh_chain", "softmax_rows", "layernorm", "row_sum", "rmsnorm",
                 "linear_bias_relu", "silu_clamp_mul")

MUTANT = """

# --- benchmark mutant: shifts the output, so every harness must call it incorrect ---
_bench_forward = ModelNew.forward


def _bench_shifted_forward(self, *args):
    return _bench_forward(self, *args) + 0.5


ModelNew.forward = _bench_shifted_forward
"""


def make_candidates(names: list[str], per_spec: int) -> list[dict[str, str]]:
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

    synth = OfflineSynthesizer()
    out = []
    for name in names:
        raw = example_path(name).read_text()
        source = scaled_variant(gpu_variant(raw), pick_scale(raw))
        seeds = synth.propose(ProposalRequest(spec_source=source, spec_name=name, count=max(1, per_spec // 2),
                                              hardware_kind="nvidia"))
        props = list(seeds)
        if seeds:
            p = seeds[0]
            parent = ParentInfo(candidate_id="seed", source=p.source, transformation=p.transformation,
                                genome=dict(p.genome))
            props += synth.propose(ProposalRequest(spec_source=source, spec_name=name, parent=parent,
                                                   count=per_spec - len(seeds), hardware_kind="nvidia"))
        for i, p in enumerate(props[:per_spec]):
            out.append({"spec": name, "spec_source": source, "id": f"{name}-{i}", "source": p.source})
        if props:
            out.append({"spec": name, "spec_source": source, "id": f"{name}-mutant",
                        "source": props[0].source + MUTANT})
    return out


@dataclass
class Run:
    """One Judge run over the candidates."""

    seconds: float  # from creating the Judge to the last verdict
    startup: float  # the part the Judge's start-up took: paid once per Judge, not per candidate
    verdicts: dict[str, dict[str, Any]]
    startup_steps: dict[str, float] = field(default_factory=dict)  # one worker's start-up, per step


def run_ours(cands: list[dict[str, str]], reuse: bool | None = None, parallel: int = 1) -> Run:
    """Judge every candidate; ``reuse`` is ``EvalOptions.reuse_worker_after_failure``
    (None: the default, which keeps a CUDA worker after incorrect verdicts)."""
    from ke_evaluator.judge import EvalJob, EvalOptions, Judge

    results = {}
    t0 = time.perf_counter()
    with Judge(EvalOptions(device="cuda", reuse_worker_after_failure=reuse, parallel_workers=parallel)) as judge:
        judge.warm_up()
        startup = time.perf_counter() - t0
        steps = dict(judge.sandbox_info.get("startup_s") or {})
        if parallel > 1:
            verdicts = judge.evaluate_many([EvalJob(c["spec_source"], c["source"], c["id"]) for c in cands])
        else:
            verdicts = []
            for c in cands:
                verdicts.append(judge.evaluate(c["spec_source"], c["source"], c["id"]))
                print(f"  {c['id']:<24} {verdicts[-1].status:<14} {time.perf_counter() - t0:6.1f}s", flush=True)
        for c, v in zip(cands, verdicts, strict=True):
            cache = v.evidence.get("reference_cache") or {}
            lock = v.evidence.get("device_lock") or {}
            results[c["id"]] = {"status": v.status, "reason": v.reason[:200], "speedup": v.speedup,
                                "candidate_ms": v.candidate_timing.median_ms if v.candidate_timing else None,
                                "candidate_host_ms": v.candidate_timing.host_median_ms if v.candidate_timing else None,
                                "candidate_per_call_ms": v.candidate_timing.per_call_median_ms
                                if v.candidate_timing else None,
                                "ci": [v.candidate_timing.ci_low_ms, v.candidate_timing.ci_high_ms]
                                if v.candidate_timing else None,
                                "trials": v.candidate_timing.trials if v.candidate_timing else 0,
                                "wall_s": v.evidence.get("wall_s"), "stage_s": v.evidence.get("stage_s"),
                                "reference_outputs": cache.get("reference_outputs"),
                                "lock_wait_s": sum((lock.get("waited_s") or {}).values()),
                                "compiles_unlocked": lock.get("compiles_unlocked", 0)}
    return Run(time.perf_counter() - t0, startup, results, steps)


def run_baseline(cands: list[dict[str, str]], workdir: Path) -> tuple[float, dict[str, dict]]:
    import json

    results = {}
    t0 = time.perf_counter()
    for c in cands:
        spec_file = workdir / f"{c['id']}_spec.py"
        cand_file = workdir / f"{c['id']}_cand.py"
        spec_file.write_text(c["spec_source"])
        cand_file.write_text(c["source"])
        proc = subprocess.run([sys.executable, str(Path(__file__).parent / "baseline_harness.py"), str(spec_file),
                               str(cand_file)], capture_output=True, text=True, timeout=600)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        results[c["id"]] = json.loads(lines[-1]) if lines else {"status": "crashed", "reason": proc.stderr[-300:]}
    return time.perf_counter() - t0, results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--specs", default=",".join(DEFAULT_SPECS))
    ap.add_argument("--per-spec", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5, help="correct candidates timed twice, in fresh workers")
    ap.add_argument("--parallel", default="",
                    help="comma-separated worker counts (> 1): also run the Judge with that many parallel "
                         "workers on the GPU, e.g. 4,8")
    ap.add_argument("--skip-replace", action="store_true",
                    help="leave out the run that replaces the worker after every non-correct verdict")
    ap.add_argument("--stack-dump-s", type=float, default=0.0,
                    help="print every thread's stack after this many seconds (diagnosing a stall)")
    args = ap.parse_args()
    if args.stack_dump_s > 0:
        import faulthandler

        faulthandler.dump_traceback_later(args.stack_dump_s, exit=False)
    names = [s for s in args.specs.split(",") if s]
    t0 = time.perf_counter()
    cands = make_candidates(names, args.per_spec)
    print(f"{len(cands)} candidates generated in {time.perf_counter() - t0:.0f}s", flush=True)
    first = run_ours(cands)
    ours_s, ours_startup, ours = first.seconds, first.startup, first.verdicts
    print(f"ours (default): {ours_s:.1f}s, of which {ours_startup:.1f}s Judge start-up "
          f"(one worker, per step: {first.startup_steps})", flush=True)
    par_runs: list[tuple[int, Run]] = []
    for width in [int(w) for w in args.parallel.split(",") if w.strip() and int(w) > 1]:
        run = run_ours(cands, parallel=width)
        par_runs.append((width, run))
        print(f"ours ({width} parallel workers): {run.seconds:.1f}s, of which {run.startup:.1f}s start-up",
              flush=True)
    replace = run_ours(cands, reuse=False) if not args.skip_replace else Run(0.0, 0.0, {})
    if replace.verdicts:
        print(f"ours (worker replaced after every failure): {replace.seconds:.1f}s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        base_s, base = run_baseline(cands, Path(tmp))
    print(f"baseline: {base_s:.1f}s", flush=True)
    agree, stricter, disagree = 0, [], []
    for c in cands:
        a, b = ours[c["id"]]["status"] == "correct", base[c["id"]]["status"] == "correct"
        if a == b:
            agree += 1
        elif b and not a:
            stricter.append({"id": c["id"], "ours": ours[c["id"]]["status"], "reason": ours[c["id"]]["reason"]})
        else:
            disagree.append({"id": c["id"], "ours": ours[c["id"]], "baseline": base[c["id"]]})
    # Timing spread: the same candidate judged again (fresh Judge, fresh workers).
    correct = [c for c in cands if ours[c["id"]]["status"] == "correct"][: args.repeat]
    again = run_ours(correct).verdicts
    spread = [{"id": c["id"], "first_ms": ours[c["id"]]["candidate_ms"], "second_ms": again[c["id"]]["candidate_ms"],
               "diff_pct": 100 * abs(again[c["id"]]["candidate_ms"] - ours[c["id"]]["candidate_ms"])
               / ours[c["id"]]["candidate_ms"],
               "first_per_call_ms": ours[c["id"]]["candidate_per_call_ms"],
               "second_per_call_ms": again[c["id"]]["candidate_per_call_ms"]}
              for c in correct if again[c["id"]]["candidate_ms"]]
    n = len(cands)
    summary = {
        "date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "candidates": n, "specs": names,
        "ours_seconds": ours_s, "baseline_seconds": base_s, "ours_startup_steps": first.startup_steps,
        "ours_replace_seconds": replace.seconds,
        "replace_ratio": base_s / replace.seconds if replace.seconds else None,
        "replace_agreement": sum(ours[c["id"]]["status"] == replace.verdicts[c["id"]]["status"] for c in cands)
        if replace.verdicts else None,
        "ours_per_gpu_minute": 60 * n / ours_s, "baseline_per_gpu_minute": 60 * n / base_s,
        "throughput_ratio": base_s / ours_s, "verdict_agreement": agree,
        # a Judge is started once and judges for hours: the ratio with its start-up left out
        "ours_startup_seconds": ours_startup, "warm_throughput_ratio": base_s / (ours_s - ours_startup),
        "ours_stricter": stricter, "disagreements": disagree, "timing_spread": spread,
        "ours": ours, "baseline": base, "ours_replace": replace.verdicts,
        "reference_outputs_cached": sum(r.get("reference_outputs") == "cached" for r in ours.values()),
    }
    summary["parallel_runs"] = [{
        "workers": width, "seconds": r.seconds, "per_gpu_minute": 60 * n / r.seconds, "ratio": base_s / r.seconds,
        "startup_seconds": r.startup, "startup_steps": r.startup_steps,
        "warm_per_gpu_minute": 60 * n / (r.seconds - r.startup), "warm_ratio": base_s / (r.seconds - r.startup),
        "agreement": sum(ours[c["id"]]["status"] == r.verdicts[c["id"]]["status"] for c in cands),
        "lock_wait_s": sum(v.get("lock_wait_s") or 0.0 for v in r.verdicts.values()),
        "compiles_unlocked": sum(v.get("compiles_unlocked") or 0 for v in r.verdicts.values()),
        "verdicts": r.verdicts,
    } for width, r in par_runs]
    write_json(args.out / "eval_throughput.json", summary)
    print(f"device {summary['fingerprint'].get('gpu')}  torch {summary['fingerprint']['torch']}  "
          f"triton {summary['fingerprint']['triton']}")
    print(f"candidates {n}: ours {ours_s:.1f}s ({summary['ours_per_gpu_minute']:.1f}/min)  "
          f"baseline {base_s:.1f}s ({summary['baseline_per_gpu_minute']:.1f}/min)  "
          f"ratio {summary['throughput_ratio']:.2f}x; without the Judge's start-up ({ours_startup:.1f}s) "
          f"{summary['warm_throughput_ratio']:.2f}x")
    if replace.verdicts:
        print(f"ours replacing the worker after every failure: {replace.seconds:.1f}s  "
              f"ratio {summary['replace_ratio']:.2f}x  same verdicts {summary['replace_agreement']}/{n}")
    for run in summary["parallel_runs"]:
        print(f"ours with {run['workers']} parallel workers: {run['seconds']:.1f}s "
              f"({run['per_gpu_minute']:.1f}/min)  ratio {run['ratio']:.2f}x  "
              f"same verdicts {run['agreement']}/{n}  waiting for the device lock {run['lock_wait_s']:.1f}s "
              f"in all; {run['compiles_unlocked']} compiles with the lock released; without the start-up "
              f"({run['startup_seconds']:.1f}s) {run['warm_per_gpu_minute']:.1f}/min, {run['warm_ratio']:.2f}x")
    print(f"reference outputs served from the cache: {summary['reference_outputs_cached']}/{n} (default run)")
    stages: dict[str, float] = {}
    for r in ours.values():
        for k, val in (r.get("stage_s") or {}).items():
            stages[k] = stages.get(k, 0.0) + val
    walls = sum(r.get("wall_s") or 0 for r in ours.values())
    print(f"ours wall {walls:.1f}s; in-worker stages: { {k: round(v, 1) for k, v in stages.items()} }")
    print(f"correct/not-correct agreement {agree}/{n}; ours stricter on {len(stricter)}; other disagreements "
          f"{len(disagree)}")
    for s in stricter + disagree:
        print("  ", s)
    for s in spread:
        print(f"  spread {s['id']}: device {s['first_ms']:.4f} vs {s['second_ms']:.4f} ms ({s['diff_pct']:.1f}%); "
              f"per call {s['first_per_call_ms']:.4f} vs {s['second_per_call_ms']:.4f} ms")


if __name__ == "__main__":
    main()
