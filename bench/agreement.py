"""Agreement: the judge's speedup against an independent re-time in a fresh process.

Per example (by default one per offline-synthesizer family at GPU size, and the two
real-size cases whose claimed speedups users could not reproduce: the transposed 2-D
convolution and the bidirectional LSTM), the offline synthesizer's seed is judged by the
``Judge`` under a precision contract (``--precision``, default ``default``), then the same
candidate is re-timed in a new Python process by ``search_bench.final_timing`` (eager and
the candidate side by side, PyTorch's defaults plus whatever the spec sets at import, none
of the judge's machinery). A row fails when the two speedups differ by more than
``--tolerance`` (10 %); the script exits 1 when any row fails.

For the convolution and recurrent examples the fresh process also times eager under the
``strict`` flags beside eager under the spec's own (TF32's share of eager), the judge judges
the seed under ``strict`` too, and the row lists what differs between the judge's timing and
the fresh one: flags, grad mode, cudnn.benchmark, input layouts, input sets.

    python bench/agreement.py [--specs default|a,b] [--precision default] [--time-limit-s 480]
                              [--tolerance 0.10] [--device cuda|cpu] [--out DIR]

Writes DIR/agreement.json (DIR: $OUT, else bench/results) and prints one line per spec.
``--device cpu`` runs the same logic in Triton's interpreter (tests): its timings say
nothing about speed, so no row is judged there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

from common import (  # noqa: E402
    LARGE_DIR,
    example_path,
    fingerprint,
    gpu_variant,
    load_module,
    pick_scale,
    scaled_variant,
    time_side_by_side,
    write_json,
)

# One example per offline family (pointwise, row, matmul, conv, transposed conv, pool,
# attention, recurrent) at GPU size, then the two real-size specs of the issue.
DEFAULT_SPECS = ("relu_scale_add", "softmax_rows", "linear_bias_relu", "conv2d_bias_relu",
                 "convtranspose1d_upsample_leaky", "maxpool2d_relu", "sdpa_causal", "model_lstm_classifier",
                 "conv_transpose2d_upsample", "lstm_bidirectional")
# Whose eager time cuDNN's TF32 moves: convolutions and recurrent layers.
_CUDNN = re.compile(r"\b(nn\.(Conv|ConvTranspose)\w*|F\.conv\w*|nn\.functional\.conv\w*|nn\.(LSTM|GRU|RNN)\b|"
                    r"nn\.(LSTM|GRU|RNN)Cell)")
_FRESH_MARK = "AGREEMENT_FRESH "


def cudnn_bound(source: str) -> bool:
    return bool(_CUDNN.search(source))


def spec_for(name: str, device: str) -> tuple[str, bool]:
    """The source judged for ``name``: examples/large as written, any other example at the
    GPU size ``search_bench.py`` times it at (on the CPU: as written)."""
    large = LARGE_DIR / f"{name}.py"
    if large.exists():
        return large.read_text(), True
    raw = example_path(name).read_text()
    if device != "cuda":
        return raw, False
    return scaled_variant(gpu_variant(raw), pick_scale(raw)), False


def disagreement(judge_speedup: float, fresh_speedup: float) -> float | None:
    """|judge / fresh - 1|: how far the judge's figure is from the fresh process's (None
    when either is missing)."""
    if not (judge_speedup > 0 and fresh_speedup > 0):
        return None
    return abs(judge_speedup / fresh_speedup - 1.0)


def differences(judge: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """What differs between the judge's timing of a verdict and the fresh process's."""
    jflags = (judge.get("precision") or {}).get("flags") or {}
    fflags = fresh.get("flags") or {}
    timing = judge.get("timing_evidence") or {}
    return {
        "flags": {k: {"judge": jflags.get(k), "fresh": fflags.get(k)}
                  for k in sorted(set(jflags) | set(fflags)) if jflags.get(k) != fflags.get(k)},
        "cudnn_benchmark": {"judge": jflags.get("cudnn.benchmark"), "fresh": fflags.get("cudnn.benchmark")},
        # the judge times its contestants under torch.no_grad, as final_timing does
        "grad_mode": {"judge": "no_grad", "fresh": fresh.get("grad_mode", "no_grad")},
        "input_layouts_equal": (fresh.get("inputs") or {}).get("same_layout"),
        "input_sets": {"judge": timing.get("input_sets"), "fresh": 1,
                       "judge_values_refreshed_each_round": timing.get("fresh_values_each_round")},
        "l2_flush": {"judge": timing.get("l2_flush"), "fresh": "every sample"},
    }


# -- the fresh process ------------------------------------------------------------------------
def _layout(xs: list[Any]) -> list[dict[str, Any]]:
    import torch

    return [{"shape": list(x.shape), "dtype": str(x.dtype), "stride": list(x.stride()),
             "contiguous": x.is_contiguous()} if isinstance(x, torch.Tensor) else {"value": repr(x)[:40]} for x in xs]


def input_layouts(spec_source: str, device: str) -> dict[str, Any]:
    """Inputs as final_timing makes them (host, then moved) and as the judge does (made on
    the device: ``loading.LoadedSpec.inputs``): shapes, dtypes, strides."""
    import torch

    from ke_evaluator.worker import loading

    mod = load_module("agreement_layout_spec", spec_source)
    torch.manual_seed(7)
    host = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    judged = loading.LoadedSpec(sha="", name="", module=mod).inputs(7, torch.device(device))
    a, b = _layout(host), _layout(judged)
    return {"fresh": a, "judge": b, "same_layout": a == b}


def eager_under_contracts(spec_source: str, device: str) -> dict[str, Any]:
    """Eager with the process's own flags (PyTorch's defaults plus the spec's) against eager
    under ``strict``, timed interleaved on the same inputs (flags set before each call: a
    host-side write, outside the device time compared)."""
    import torch
    from common import contestants

    from ke_evaluator.worker import precision as wp

    ref, _models, inputs = contestants(spec_source, {}, device, "agreement_contract")
    own = wp.read_flags()
    strict = wp.named_flags("strict")
    wp.apply_flags(own)

    def under(flags: dict[str, str]) -> Any:
        def call(xs: list[Any]) -> Any:
            wp.apply_flags(flags)
            return ref(*xs)

        return call

    with torch.no_grad():
        summaries, _info = time_side_by_side({"eager_default": under(own), "eager_strict": under(strict)}, inputs,
                                             device=device)
    wp.apply_flags(own)
    out = {f"{k}_ms": s["median_ms"] for k, s in summaries.items()}
    out["strict_flags"] = {k: v for k, v in strict.items() if own.get(k) != v}
    if out["eager_default_ms"] > 0:
        out["strict_over_default"] = out["eager_strict_ms"] / out["eager_default_ms"]
    return out


def fresh_retime(spec_source: str, cand_source: str, device: str, contracts: bool) -> dict[str, Any]:
    """The fresh process's side: final_timing with PyTorch's defaults (nothing of the judge's
    is imported before it), then the flags it ran under, the inputs' layouts and, for
    ``contracts``, eager under strict vs the defaults."""
    import torch
    from search_bench import final_timing

    from ke_evaluator.worker import precision as wp

    defaults = wp.read_flags()  # before the spec's import: this process's torch defaults
    out = final_timing(spec_source, cand_source, device=device, compile_baseline=False)
    out["flags"] = wp.read_flags()  # after it (final_timing imported the spec)
    out["spec_flags"] = {k: v for k, v in out["flags"].items() if defaults.get(k) != v}
    out["grad_mode"] = "no_grad"  # final_timing times under torch.no_grad
    out["grad_enabled_outside"] = torch.is_grad_enabled()
    out["inputs"] = input_layouts(spec_source, device)
    if contracts:
        out.update(eager_under_contracts(spec_source, device))
    return out


def run_fresh(spec_source: str, cand_source: str, device: str, contracts: bool, timeout_s: float) -> dict[str, Any]:
    """``fresh_retime`` in a new Python process (this script with ``--fresh``)."""
    with tempfile.TemporaryDirectory(prefix="agreement-") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"spec": spec_source, "candidate": cand_source, "device": device,
                                   "contracts": contracts}))
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--fresh", str(job)],
                              capture_output=True, text=True, timeout=max(30.0, timeout_s), env=dict(os.environ))
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_FRESH_MARK):
            return dict(json.loads(line[len(_FRESH_MARK):]))
    return {"fresh_error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}


# -- the judge's side -------------------------------------------------------------------------
def judged(judge: Any, source: str, cand_source: str, name: str, precision: str) -> dict[str, Any]:
    v = judge.evaluate(source, cand_source, candidate_id=f"{name}-seed-{precision}", precision=precision)
    bt, ct = v.baseline_timing, v.candidate_timing
    return {"status": v.status, "reason": v.reason[:300], "speedup": v.speedup,
            "baseline_ms": bt.median_ms if bt else None, "candidate_ms": ct.median_ms if ct else None,
            "per_call_speedup": (bt.per_call_median_ms / ct.per_call_median_ms
                                 if bt and ct and ct.per_call_median_ms > 0 else None),
            "precision": v.precision.to_dict() if v.precision is not None else None,
            "timing_evidence": v.evidence.get("timing")}


def seed_of(source: str, name: str, device: str) -> str:
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    props = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1,
                                                         hardware_kind="nvidia" if device == "cuda" else "cpu"))
    return props[0].source


def row_for(judge: Any, name: str, args: argparse.Namespace, left_s: float) -> dict[str, Any]:
    source, large = spec_for(name, args.device)
    contracts = cudnn_bound(source)
    row: dict[str, Any] = {"spec": name, "large": large, "cudnn_bound": contracts, "precision": args.precision}
    seed = seed_of(source, name, args.device)
    check = judge.validate_spec(source, name)
    if not check.ok:
        return {**row, "spec_error": check.reason[:600]}
    row["judge"] = judged(judge, source, seed, name, args.precision)
    if row["judge"]["status"] != "correct":
        return row
    if contracts and args.precision != "strict":
        row["judge_strict"] = judged(judge, source, seed, name, "strict")
    fresh = row["fresh"] = run_fresh(source, seed, args.device, contracts, left_s)
    if "fresh_error" in fresh:
        return row
    fresh_speedup = fresh["eager_ms"] / fresh["best_ms"] if fresh.get("best_ms") else 0.0
    row["fresh_speedup"] = fresh_speedup
    row["judge_speedup"] = row["judge"]["speedup"]
    off = disagreement(row["judge_speedup"], fresh_speedup)
    row["disagreement"] = off
    # Which side moved: the judge's eager against the fresh eager, candidate against candidate.
    if fresh.get("eager_ms") and row["judge"]["baseline_ms"]:
        row["eager_judge_over_fresh"] = row["judge"]["baseline_ms"] / fresh["eager_ms"]
    if fresh.get("best_ms") and row["judge"]["candidate_ms"]:
        row["candidate_judge_over_fresh"] = row["judge"]["candidate_ms"] / fresh["best_ms"]
    row["differences"] = differences(row["judge"], fresh)
    if args.device == "cuda" and off is not None:
        row["agree"] = off <= args.tolerance
    return row


def line(r: dict[str, Any]) -> str:
    if "judge_speedup" not in r:
        why = r.get("spec_error") or (r.get("judge") or {}).get("reason") or (r.get("fresh") or {}).get(
            "fresh_error") or r.get("bench_error", "") or r.get("skipped", "")
        return f"{r['spec']:<32} no comparison: {str(why)[-200:]}"
    verdict = {True: "agree", False: "DISAGREE", None: "not judged"}[r.get("agree")]
    text = (f"{r['spec']:<32} judge {r['judge_speedup']:.3f}x fresh {r['fresh_speedup']:.3f}x "
            f"off {r['disagreement'] * 100:.1f}% {verdict} [{r['precision']}]")
    fresh = r.get("fresh") or {}
    if "strict_over_default" in fresh:
        text += f" | eager strict/default {fresh['strict_over_default']:.2f}x"
    if "judge_strict" in r:
        text += f" | judge strict {r['judge_strict']['speedup']:.3f}x"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--specs", default="default", help="comma-separated example names, or default")
    ap.add_argument("--precision", default="default", choices=("default", "strict", "tf32"))
    ap.add_argument("--tolerance", type=float, default=0.10, help="largest |judge / fresh - 1| that agrees")
    ap.add_argument("--time-limit-s", type=float, default=480.0, help="start no new spec after this")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--trials", type=int, default=3, help="the judge's correctness trials")
    ap.add_argument("--fresh", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.fresh is not None:  # the child: one fresh-process re-time
        job = json.loads(args.fresh.read_text())
        out = fresh_retime(job["spec"], job["candidate"], job["device"], job["contracts"])
        sys.stdout.write(_FRESH_MARK + json.dumps(out, default=str) + "\n")
        return 0
    from ke_evaluator.judge import EvalOptions, Judge

    names = list(DEFAULT_SPECS) if args.specs == "default" else [n for n in args.specs.split(",") if n]
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    opts = EvalOptions(device=args.device, correctness_trials=args.trials, precision=args.precision,
                       profile_library_time=False)

    def save() -> None:
        failed = [r["spec"] for r in rows if r.get("agree") is False]
        write_json(args.out / "agreement.json",
                   {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "precision": args.precision,
                    "tolerance": args.tolerance, "device": args.device, "rows": rows, "disagree": failed,
                    "compared": sum(1 for r in rows if "judge_speedup" in r)})

    with Judge(opts) as judge:
        judge.warm_up()
        for name in names:
            left = args.time_limit_s - (time.perf_counter() - started)
            if left <= 0:
                rows.append({"spec": name, "skipped": "time limit of this run"})
                continue
            try:
                row = row_for(judge, name, args, left)
            except Exception:  # noqa: BLE001 - one spec's failure is a finding, not the end of the run
                row = {"spec": name, "bench_error": traceback.format_exc()[-800:]}
            rows.append(row)
            print(line(row), flush=True)
            save()
    save()
    return 1 if any(r.get("agree") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
