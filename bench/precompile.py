"""The compile phase of whole-model seeds with and without the dry run that compiles their
kernels side by side (worker/precompile.py), on a GPU.

    python bench/precompile.py [--out DIR] [--specs a,b,...] [--time-limit-s S]

Per spec: the offline synthesizer's seed at the spec's GPU size (examples/large as
written), judged twice, each time by a fresh Judge whose scratch root is new, so Triton's
on-disk cache starts cold: ``precompile="off"`` then ``"on"``. Reported: the verdict, the
worker's ``stage_s["compile"]`` (import, both models, the dry run, the first call) and the
dry run's evidence (kernels reached, seconds). Without a GPU the dry run compiles nothing
(the interpreter): the script says so and stops. Writes DIR/precompile.json.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from common import fingerprint, spec_source, whole_model_arguments, write_json

SPECS = ("resnet50_bottleneck", "densenet_blocks", "mobilenet_inverted_residual", "unet_segmentation",
         "model_transformer_block", "model_lstm_cell_loop")


def judge_once(source: str, candidate: str, name: str, mode: str) -> dict[str, Any]:
    from ke_evaluator.judge import EvalOptions, Judge

    with tempfile.TemporaryDirectory(prefix="ke-precompile-") as root, \
            Judge(EvalOptions(device="cuda", time_candidates=False, correctness_trials=1, compile_timeout_s=600.0,
                              precompile=mode, scratch_dir=root)) as judge:
        judge.warm_up()
        t0 = time.perf_counter()
        v = judge.evaluate(source, candidate, candidate_id=f"{name}-{mode}")
        return {"status": v.status, "reason": v.reason[:300], "wall_s": round(time.perf_counter() - t0, 2),
                "compile_s": (v.evidence.get("stage_s") or {}).get("compile"),
                "precompile": v.evidence.get("precompile")}


def main() -> None:
    ap = whole_model_arguments(SPECS)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.stdout.write("no GPU: the interpreter compiles nothing, there is nothing to measure\n")
        return
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    synth = OfflineSynthesizer()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "host": {**fingerprint(), "cpus": os.cpu_count()}, "rows": []}
    start = time.monotonic()
    for name in (n for n in args.specs.split(",") if n):
        if time.monotonic() - start > args.time_limit_s:
            break
        source, _large = spec_source(name)
        (prop,) = synth.propose(ProposalRequest(spec_source=source, spec_name=name, count=1, hardware_kind="nvidia"))
        row = {"spec": name, "jit_functions": prop.source.count("@triton.jit\n"),
               **{mode: judge_once(source, prop.source, name, mode) for mode in ("off", "on")}}
        result["rows"].append(row)
        write_json(args.out / "precompile.json", result)
        sys.stdout.write(f"{name}: compile {row['off']['compile_s']} s -> {row['on']['compile_s']} s "
                         f"({row['on']['status']}, dry run {row['on']['precompile']})\n")


if __name__ == "__main__":
    main()
