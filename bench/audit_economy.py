"""The integrity phase's seconds (``evidence["stage_s"]["integrity"]``: the kernel-dependency
probe and the arithmetic audit) with the audit's economy on and off, side by side: the seed
candidates of whole-model examples and the evaluator's exploit candidates, each judged by
two Judges that differ only in ``EvalOptions.audit_economy``, alternately, ``--repeats``
times. Per candidate: the median seconds of each, the verdicts (status and reason, digits
aside: the share of library time differs between runs) and how the audit decided.

    python bench/audit_economy.py --out DIR [--device cpu] [--repeats 3] [--specs a,b]

On the CPU the kernels run in Triton's interpreter (as the evaluator tests do), so the
seconds weigh the interpreter's launches, not a GPU's copies. ``examples/large`` specs are
judged at shrunk sizes there (``SHRUNK``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any

import common
from common import fingerprint, write_json

ROOT = common.ROOT
# whole models: the offline synthesizer's seed of each
MODELS = ["styles/resnet_make_layer", "styles/model_dense_block", "styles/vgg_small", "large/unet_segmentation"]
# (candidate file of tests/evaluator/candidates, its spec in examples/ops)
EXPLOITS = [("decoy_compute_plus_copy", "relu_scale_add"), ("library_forward_copy_kernel", "relu_scale_add"),
            ("library_forward_add_zero", "relu_scale_add"), ("library_forward_transpose_kernel", "relu_scale_add"),
            ("decoy_kernel_functional", "relu_scale_add"), ("ok_partial_fallback_linear", "linear_bias_relu"),
            ("ok_relu_scale_add", "relu_scale_add")]
# examples/large at a size the CPU interpreter judges in seconds (module-level constants)
SHRUNK = {"large/unet_segmentation": {"batch_size": 2, "image_height": 32, "image_width": 32, "base_features": 8}}


def _spec(name: str, device: str) -> str:
    source = (ROOT / "examples" / f"{name}.py").read_text()
    if device == "cpu" and name in SHRUNK:
        from kernelevolve.spec_shrink import rewrite, size_constants

        source = rewrite(source, size_constants(source), SHRUNK[name])
    return source


def _jobs(names: set[str] | None, device: str) -> list[tuple[str, str, str]]:
    """(label, spec source, candidate source)."""
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    synth = OfflineSynthesizer()
    jobs = []
    for name in MODELS:
        if names is None or name.split("/")[-1] in names:
            spec = _spec(name, device)
            (seed,) = synth.propose(ProposalRequest(spec_source=spec, spec_name=name.split("/")[-1], count=1))
            jobs.append((name, spec, seed.source))
    for cand, spec_name in EXPLOITS:
        if names is None or cand in names:
            source = (ROOT / "tests" / "evaluator" / "candidates" / f"{cand}.py").read_text()
            jobs.append((cand, _spec(f"ops/{spec_name}", device), source))
    return jobs


def _digitless(reason: str) -> str:
    return re.sub(r"[0-9][0-9.e+-]*", "#", reason)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--specs", default="", help="comma-separated model or candidate names (default: all)")
    args = ap.parse_args()
    from ke_evaluator.judge import EvalOptions, Judge, WorkerPoolOptions

    jobs = _jobs(set(args.specs.split(",")) if args.specs else None, args.device)
    base = dict(device=args.device, correctness_trials=2, time_candidates=False, compile_timeout_s=300.0,
                run_timeout_s=600.0, seed=1234, pool=WorkerPoolOptions(reuse_worker_after_failure=True))
    rows: list[dict[str, Any]] = []
    with Judge(EvalOptions(**base, audit_economy=True)) as on, \
            Judge(EvalOptions(**base, audit_economy=False)) as off:  # type: ignore[arg-type]
        on.warm_up()
        off.warm_up()
        for label, spec, cand in jobs:
            seconds: dict[str, list[float]] = {"on": [], "off": []}
            verdicts: dict[str, Any] = {}
            for _ in range(args.repeats):
                for key, judge in (("off", off), ("on", on)):
                    v = judge.evaluate(spec, cand, candidate_id=label)
                    seconds[key].append(float(v.evidence.get("stage_s", {}).get("integrity", float("nan"))))
                    verdicts[key] = (v.status, v.reason, v.evidence.get("kernel_arithmetic"))
            row = {"candidate": label, "status": verdicts["on"][0],
                   "same_verdict": (verdicts["on"][0], _digitless(verdicts["on"][1]))
                   == (verdicts["off"][0], _digitless(verdicts["off"][1])),
                   "reason": verdicts["on"][1][:160],
                   "integrity_s_off": statistics.median(seconds["off"]),
                   "integrity_s_on": statistics.median(seconds["on"]), "samples": seconds,
                   "audit_on": (verdicts["on"][2] or {}).get("audit", "not reached"),
                   "audit_off": (verdicts["off"][2] or {}).get("audit", "not reached")}
            rows.append(row)
            print(f"{label:<34} {row['status']:<9} same={row['same_verdict']!s:<5} "
                  f"off {row['integrity_s_off']:7.2f}s  on {row['integrity_s_on']:7.2f}s  {row['audit_on']}",
                  flush=True)
            write_json(args.out / "audit_economy.json",
                       {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "device": args.device,
                        "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
