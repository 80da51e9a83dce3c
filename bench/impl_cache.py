"""Fill the offline synthesizer's impl cache on a GPU: per conv / matmul, Triton kernel or
library call, measured.

For every spec and every conv / matmul whose ``impl.<node>`` knob its seed offers, the seed
candidate is lowered twice, that node in Triton and in the library (everything else as the
seed), and the two are timed side by side with the judge's protocol
(``common.time_side_by_side``: L2 flush, interleaved, CUDA events). The faster one is
recorded in the cache (``ke_synthesizer.offline.families.impl_policy.ImplCache``) under the
node's signature (op, operand shapes, dtype) and ``--device`` (the hardware kind the
sessions that read it run on: ``synthesizer.impl_cache`` names the file). The difference
between the two candidates is the node's own time plus the epilogue kernel its library call
needs, which is what the choice trades.

Usage (GPU): ``cd bench && python3 impl_cache.py --device nvidia --cache impl_cache.json
[--specs a,b] [--out DIR]`` (entries are added to an existing cache). Without CUDA it lowers
both candidates of every node, checks them against the reference and records nothing.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from common import (
    contestants,
    example_names,
    example_path,
    fingerprint,
    gpu_variant,
    interpreter_without_cuda,
    max_error,
    time_side_by_side,
    whole_model_arguments,
    write_json,
)

# whole models with several convolutions / matmuls, and single-op specs of both families
DEFAULT_SPECS = ("model_cnn_head", "model_conv_block", "model_residual_block", "model_mlp", "vgg_small",
                 "resnet_make_layer", "depthwise_separable_block", "conv2d_bias_relu", "linear_bias_relu")


def measure(spec_source: str, sources: dict[str, str], device: str) -> dict[str, Any]:
    """Max error of each candidate against the reference and, on CUDA, their times."""
    import torch

    ref, models, inputs = contestants(spec_source, sources, device, "impl")
    out: dict[str, Any] = {}
    with torch.no_grad():
        expected = ref(*inputs)
        for label, model in models.items():
            out[f"{label}_max_abs_error"] = max_error(model(*inputs), expected)
        if device != "cuda":
            return out
        summaries, _ = time_side_by_side({label: (lambda xs, m=m: m(*xs)) for label, m in models.items()}, inputs)
    for label, summary in summaries.items():
        out[f"{label}_ms"] = summary["per_call_median_ms"]
    return out


def main() -> None:
    ap = whole_model_arguments(DEFAULT_SPECS)
    ap.add_argument("--cache", type=Path, default=None, help="the cache file to add to (default: OUT/impl_cache.json)")
    ap.add_argument("--device", default="nvidia", help="the hardware kind the entries are recorded for")
    args = ap.parse_args()
    device = interpreter_without_cuda()  # without CUDA: correctness only, through Triton's interpreter
    from ke_synthesizer.offline import OfflineSynthesizer
    from ke_synthesizer.offline.families.impl_policy import ImplCache, signature
    from ke_synthesizer.offline.families.library_impl import heavy_nodes
    from ke_synthesizer.offline.graph import _param_shape_fn

    cache_path = args.cache or args.out / "impl_cache.json"
    cache = ImplCache.load(cache_path)
    synth = OfflineSynthesizer()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name in [n for n in example_names(args.specs) if example_path(n).exists()]:
        if time.perf_counter() - started > args.time_limit_s:
            rows.append({"spec": name, "skipped": "time limit of this run"})
            continue
        try:
            source = gpu_variant(example_path(name).read_text())
            captured = synth.captured(source, name)
            _, seed, _ = synth.lower(captured, {}, args.device)
            heavy = heavy_nodes(captured.gm, _param_shape_fn(captured))
            for key in [k for k in seed if k.startswith("impl.")]:
                family, node = heavy[key]
                sources = {impl: synth.lower(captured, {**seed, key: impl}, args.device)[0]
                           for impl in ("triton", "library")}
                row: dict[str, Any] = {"spec": name, "node": key, **measure(source, sources, device)}
                if device == "cuda":
                    sig = signature(node, family, captured.gm)
                    row["choice"] = cache.record(sig, args.device, row["triton_ms"], row["library_ms"])
                rows.append(row)
                print(row, flush=True)
        except Exception as exc:  # one spec's failure is a row, not the end of the run
            rows.append({"spec": name, "error": repr(exc)[:400], "traceback": traceback.format_exc()[-2000:]})
            print(f"{name:28s} ERROR {exc!r}", flush=True)
    if device == "cuda":
        cache.save(cache_path)
    write_json(args.out / "impl_cache_run.json", {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(),
                                                  "device": device, "hardware_kind": args.device, "rows": rows})


if __name__ == "__main__":
    main()
