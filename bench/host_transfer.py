"""What the harness's host copies cost at real size: a 2^30-element float32 output (4 GiB)
moved to the host (``memory.to_host``) and back, and one comparison of a candidate's output
with the reference (``tolerance.compare``, with and without the float64 pass) where the
reference lies on the host or on the device, at the default chunk and at larger ones.

    python bench/host_transfer.py --out DIR [--elements 1073741824]

The real-size corpus's judge spent 140-285 s of a 4 GiB operator's 5-9 minutes in its
correctness phase (bench/RESULTS.md, 2026-11-28): this says which of the harness's copies
and checks that time is, on the device it runs on. DIR/host_transfer.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts
from common import fingerprint, write_json  # noqa: E402


def _timed(fn: Any, sync: Any) -> tuple[float, Any]:
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def run(elements: int, device: str) -> dict[str, Any]:
    import torch

    from ke_evaluator.backends import for_torch_device
    from ke_evaluator.worker import memory, tolerance

    dev = torch.device(device)
    backend = for_torch_device(dev)
    sync = backend.synchronize if backend.accelerated else (lambda: None)
    g = torch.Generator(device=dev).manual_seed(0)
    ref = torch.randn(elements, generator=g, device=dev)
    out = ref + 1e-7 * torch.randn(elements, generator=g, device=dev)
    ref64_dev = ref.to(torch.float64) + 1e-9
    rows: dict[str, Any] = {"elements": elements, "bytes": elements * 4}
    # to the host and back, as memory.to_host / clone_to do it (pageable above 1 GiB)
    rows["to_host_s"], ref_host = _timed(lambda: memory.to_host(ref, backend), sync)
    rows["to_host_again_s"], ref_host = _timed(lambda: memory.to_host(ref, backend), sync)
    rows["back_to_device_s"], _ = _timed(lambda: memory.clone_to(ref_host, dev), sync)
    rows["float64_to_host_s"], ref64_host = _timed(lambda: memory.to_host(ref64_dev, backend), sync)
    checks: list[dict[str, Any]] = []
    for where, r, r64 in (("device", ref, ref64_dev), ("host", ref_host, ref64_host)):
        for limit in (None, 1 << 24, 1 << 26):
            for budget in (False, True):
                s, cmp = _timed(lambda r=r, r64=r64, limit=limit, budget=budget: tolerance.compare(
                    out, r, None, ref64=(lambda: r64), budget=budget, limit=limit), sync)
                checks.append({"reference_on": where, "chunk": limit or tolerance.CHUNK_ELEMENTS_CUDA,
                               "float64_pass": budget, "seconds": round(s, 3), "ok": cmp.ok})
                print(checks[-1], flush=True)
    rows["compare"] = checks
    rows["device_peak_gib"] = round(backend.max_memory_allocated(dev) / 2**30, 2) if backend.accelerated else None
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--elements", type=int, default=1 << 30)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    result = {"fingerprint": fingerprint(), **run(args.elements, args.device)}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "host_transfer.json", result)
    print({k: v for k, v in result.items() if k not in ("compare", "fingerprint")})


if __name__ == "__main__":
    main()
