"""Strategy comparison at equal budget: per strategy and spec, one search session of the
product's own services run in this process (``ke_cli.inprocess``) with the offline
synthesizer and the real judge; reports the best speedup reached (the re-timed finalist)
and how many evaluations it took to reach 95 % of that best.

    python bench/strategy_compare.py --out DIR [--budget 32] [--strategies all|a,b]
                                     [--specs a,b|sample:K|default] [--device auto|cuda|cpu]
                                     [--tune-share F]

Writes DIR/strategy_compare.json (device, date, versions, one row per strategy x spec, and
per strategy the mean best speedup and mean evaluations to 95 %) and prints a table. On
CPU kernels run in the Triton interpreter: the speedups then say nothing about a GPU,
only that the comparison runs end to end (the suite's smoke test does that).

Sessions run without the search's tuning stage unless ``--tune-share`` says otherwise:
the stage would run alike after every strategy and blur what is compared; the same
strategy with ``--tune-share 0`` and ``--tune-share 0.25`` measures the stage itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

from common import bench_source, example_names, example_path, fingerprint, write_json  # noqa: E402

# A fixed subset of examples/ops: elementwise, reduction, normalisation, matmul, conv.
DEFAULT_SPECS = ("gelu_residual", "softmax_rows", "layernorm", "linear_bias_relu", "conv2d_bias_relu")


def evaluations_to_fraction(candidates: list[Any], best: float, fraction: float = 0.95) -> int | None:
    """1-based evaluation count at which a correct candidate first reached ``fraction`` of
    ``best`` (creation order of the session; None when nothing correct)."""
    if best <= 0:
        return None

    def order(c: Any) -> tuple[int, int]:
        req, _, n = c.node.node_id.lstrip("r").partition("-")
        return (int(req), int(n)) if req.isdigit() and n.isdigit() else (1 << 30, 0)

    for i, c in enumerate(sorted(candidates, key=order), start=1):
        if c.verdict.status == "correct" and c.verdict.speedup >= fraction * best:
            return i
    return None


def compare(specs: list[str], strategies: list[str], budget: int, *, judge: Any, synthesizer: Any,
            hardware_kind: str, max_inflight: int = 1, seeds: int = 0, tune_share: float = 0.0,
            on_row: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """One row per spec x strategy; ``on_row`` sees the rows so far after each (so a run
    cut short by its time slot still leaves what it measured)."""
    from ke_cli.inprocess import run_session_sync

    rows: list[dict[str, Any]] = []
    for name in specs:
        source, scale = bench_source(example_path(name).read_text(), "cuda" if hardware_kind == "nvidia" else "cpu")
        for strategy in strategies:
            row: dict[str, Any] = {"spec": name, "strategy": strategy, "budget": budget, "batch_scale": scale,
                                   "tune_share": tune_share}
            try:
                res = run_session_sync(source, name, synthesizer=synthesizer, judge=judge, budget=budget,
                                       strategy=strategy, max_inflight=max_inflight, hardware_kind=hardware_kind,
                                       seeds=seeds, tune_share=tune_share)
                best = res.best
                best_speedup = res.session.best_speedup if best is not None else 0.0
                first_best = max((c.verdict.speedup for c in res.candidates if c.verdict.status == "correct"),
                                 default=0.0)
                row.update(evaluated=len(res.candidates), seconds=round(res.seconds, 2),
                           best_speedup=best_speedup, best_id=res.session.best_candidate_id,
                           end_reason=res.session.end_reason,
                           duplicates=int(res.summary.get("duplicates", 0)),
                           evals_to_95=evaluations_to_fraction(res.candidates, first_best))
            except Exception:
                row["bench_error"] = traceback.format_exc()[-800:]
            rows.append(row)
            print(_line(row), flush=True)
            if on_row is not None:
                on_row(rows)
    return rows


def per_strategy(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for strategy in sorted({r["strategy"] for r in rows}):
        mine = [r for r in rows if r["strategy"] == strategy and "bench_error" not in r]
        reached = [r["evals_to_95"] for r in mine if r.get("evals_to_95") is not None]
        out[strategy] = {
            "specs": len(mine),
            "mean_best_speedup": statistics.mean(r["best_speedup"] for r in mine) if mine else 0.0,
            "mean_evals_to_95": statistics.mean(reached) if reached else None,
        }
    return out


def _line(r: dict[str, Any]) -> str:
    if "bench_error" in r:
        return f"{r['spec']:<22} {r['strategy']:<9} ERROR {r['bench_error'].splitlines()[-1]}"
    return (f"{r['spec']:<22} {r['strategy']:<9} best {r['best_speedup']:6.3f}x  "
            f"evals to 95% {r['evals_to_95']!s:>4}  evaluated {r['evaluated']:>3}  ({r['end_reason']})")


def main(argv: list[str] | None = None) -> None:
    from kernelevolve.ports.strategy import STRATEGY_NAMES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--strategies", default="all", help=f"comma-separated, or all ({', '.join(STRATEGY_NAMES)})")
    ap.add_argument("--specs", default="default", help=f"comma-separated example names (default: "
                    f"{', '.join(DEFAULT_SPECS)})")
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--parallel", type=int, default=1, help="judge workers; also the search's max in flight")
    ap.add_argument("--seeds", type=int, default=0, help="draft-phase seeds (0: each strategy's own)")
    ap.add_argument("--tune-share", type=float, default=0.0,
                    help="share of the budget for the tuning stage (default 0: strategies alone)")
    args = ap.parse_args(argv)

    import torch

    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
    from ke_synthesizer.offline import OfflineSynthesizer

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    strategies = list(STRATEGY_NAMES) if args.strategies == "all" else args.strategies.split(",")
    specs = list(DEFAULT_SPECS) if args.specs == "default" else example_names(args.specs)
    opts = EvalOptions(device=device, correctness_trials=3, parallel_workers=args.parallel,
                       timing=TimingOptions(max_trials=50 if device == "cuda" else 3, input_sets=2),
                       profile_library_time=False)
    started = time.perf_counter()

    def result(rows: list[dict[str, Any]], *, complete: bool) -> dict[str, Any]:
        return {"date": time.strftime("%Y-%m-%d"), "device": device, "fingerprint": fingerprint(),
                "budget": args.budget, "tune_share": args.tune_share, "specs": specs, "strategies": strategies,
                "complete": complete,
                "seconds": time.perf_counter() - started, "per_strategy": per_strategy(rows), "rows": rows}

    with Judge(opts) as judge:
        rows = compare(specs, strategies, args.budget, judge=judge, synthesizer=OfflineSynthesizer(),
                       hardware_kind="nvidia" if device == "cuda" else "cpu", max_inflight=args.parallel,
                       seeds=args.seeds, tune_share=args.tune_share,
                       on_row=lambda so_far: write_json(args.out / "strategy_compare.json",
                                                        result(so_far, complete=False)))
    final = result(rows, complete=True)
    write_json(args.out / "strategy_compare.json", final)
    for name, s in final["per_strategy"].items():
        print(f"{name:<9} mean best {s['mean_best_speedup']:.3f}x, mean evaluations to 95 %: {s['mean_evals_to_95']}")


if __name__ == "__main__":
    main()
