"""A process-per-candidate harness in the style of the common public one, for comparison.

For each candidate: a fresh Python process imports torch, builds the reference and the
candidate, generates inputs on the CPU and copies them to the GPU for each of 5
correctness trials (atol = rtol = 1e-2, as in published runs), then times 100 trials with
CUDA events after an L2 flush, and the reference the same way. No sandbox, no static or
runtime exploit checks.

    python bench/baseline_harness.py SPEC.py CANDIDATE.py   → one JSON line on stdout
"""

from __future__ import annotations

import json
import sys
import time
import traceback


def main(spec_path: str, cand_path: str) -> dict[str, object]:
    t0 = time.perf_counter()
    import torch

    def load(name: str, path: str):
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    ref_mod = load("ref_mod", spec_path)
    try:
        cand_mod = load("cand_mod", cand_path)
    except Exception as exc:
        return {"status": "compile_error", "reason": repr(exc)[:300], "wall_s": time.perf_counter() - t0}
    dev = torch.device("cuda")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(42)
    ref = ref_mod.Model(*init).to(dev)
    try:
        torch.manual_seed(42)
        cand = cand_mod.ModelNew(*init).to(dev)
    except Exception as exc:
        return {"status": "compile_error", "reason": repr(exc)[:300], "wall_s": time.perf_counter() - t0}
    with torch.no_grad():
        for trial in range(5):
            torch.manual_seed(trial)
            inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
            expected = ref(*inputs)
            try:
                got = cand(*inputs)
                torch.cuda.synchronize()
            except Exception as exc:
                return {"status": "runtime_error", "reason": repr(exc)[:300], "wall_s": time.perf_counter() - t0}
            if got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-2, rtol=1e-2):
                return {"status": "incorrect", "reason": f"trial {trial} mismatch",
                        "wall_s": time.perf_counter() - t0}
        flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)

        def time_model(model) -> float:
            times = []
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            for _ in range(100):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            return times[len(times) // 2]

        cand_ms = time_model(cand)
        ref_ms = time_model(ref)
    return {"status": "correct", "reason": "", "candidate_ms": cand_ms, "baseline_ms": ref_ms,
            "speedup": ref_ms / cand_ms, "wall_s": time.perf_counter() - t0}


if __name__ == "__main__":
    try:
        out = main(sys.argv[1], sys.argv[2])
    except Exception:
        out = {"status": "crashed", "reason": traceback.format_exc()[-300:]}
    sys.stdout.write(json.dumps(out) + "\n")
