"""Where the offline synthesizer's default (seed) candidates lose time on a GPU.

Per example spec at benchmark size: eager and seed-candidate wall time (do_bench, L2
flushed per repetition), and the same forward under the profiler: device time summed over
its kernels and the number of launches. Wall minus device time is host overhead (Python
launchers, allocation); device time against the bytes moved is kernel quality.

    python bench/profile_seeds.py --out DIR [--specs a,b|all] [--target-elements N] [--jobs 8]

Compilation runs first in a pool of processes (warming Triton's on-disk cache), timing
afterwards in one process, one spec at a time.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import traceback
from typing import Any

import common
from common import fingerprint, gpu_variant, load_module, pick_scale, scaled_variant, write_json
from search_bench import copy_bandwidth_gbps, tensor_bytes


def _seed_source(name: str, target: int) -> tuple[int, str, str, dict[str, str]]:
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    common.TARGET_ELEMENTS = target
    raw = common.example_path(name).read_text()
    scale = pick_scale(raw)
    source = scaled_variant(gpu_variant(raw), scale)
    prop = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1,
                                                        hardware_kind="cuda"))[0]
    return scale, source, prop.source, prop.genome


def _prepare(args: tuple[str, int]) -> dict[str, Any]:
    """Child process: lower the seed and run it once on the GPU so its kernels compile."""
    name, target = args
    try:
        import torch

        scale, source, cand_source, genome = _seed_source(name, target)
        spec = load_module(f"spec_{name}", source)
        cand = load_module(f"cand_{name}", cand_source)
        new = cand.ModelNew(*spec.get_init_inputs()).cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in spec.get_inputs()]
        with torch.no_grad():
            new(*inputs)
        torch.cuda.synchronize()
        return {"spec": name, "scale": scale, "source": source, "cand_source": cand_source, "genome": genome}
    except Exception:
        return {"spec": name, "error": traceback.format_exc()[-600:]}


def _device_profile(fn: Any) -> tuple[float, int]:
    """Summed kernel time (ms) and launches of one call of fn."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total_us = sum(e.device_time for e in events)
    return total_us / 5 / 1e3, len(events) // 5


def _time(prep: dict[str, Any]) -> dict[str, Any]:
    import torch
    import triton.testing

    row = {k: prep[k] for k in ("spec", "scale", "genome")}
    spec = load_module(f"t_spec_{prep['spec']}", prep["source"])
    cand = load_module(f"t_cand_{prep['spec']}", prep["cand_source"])
    init = spec.get_init_inputs()
    torch.manual_seed(1234)
    ref = spec.Model(*init).cuda()
    new = cand.ModelNew(*init).cuda()
    if set(new.state_dict()) == set(ref.state_dict()):
        new.load_state_dict(ref.state_dict())
    torch.manual_seed(7)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in spec.get_inputs()]
    with torch.no_grad():
        exp = ref(*inputs)
        got = new(*inputs)
        if isinstance(exp, torch.Tensor) and isinstance(got, torch.Tensor):
            row["max_abs_err"] = (got.double() - exp.double()).abs().max().item()
            row["max_abs_ref"] = exp.double().abs().max().item()
        row["eager_ms"] = triton.testing.do_bench(lambda: ref(*inputs), warmup=10, rep=60, return_mode="median")
        row["cand_ms"] = triton.testing.do_bench(lambda: new(*inputs), warmup=10, rep=60, return_mode="median")
        row["eager_dev_ms"], row["eager_launches"] = _device_profile(lambda: ref(*inputs))
        row["cand_dev_ms"], row["cand_launches"] = _device_profile(lambda: new(*inputs))
    row["bytes"] = tensor_bytes(inputs) + tensor_bytes(exp) + tensor_bytes(list(ref.parameters()))
    row["speedup"] = row["eager_ms"] / row["cand_ms"]
    row["dev_speedup"] = row["eager_dev_ms"] / max(row["cand_dev_ms"], 1e-9)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    common.add_example_arguments(ap)
    ap.add_argument("--time-limit-s", type=float, default=500.0)
    ap.add_argument("--tag", default="seeds")
    args = ap.parse_args()
    import torch

    started = time.perf_counter()
    names = common.example_names(args.specs)
    bw = copy_bandwidth_gbps()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        preps = pool.map(_prepare, [(n, args.target_elements) for n in names], chunksize=1)
    print(f"compiled {len(preps)} in {time.perf_counter() - started:.0f}s", flush=True)
    rows = []
    for prep in preps:
        if "error" in prep:
            rows.append(prep)
            print(f"{prep['spec']:<26} ERROR {prep['error'][-200:]}", flush=True)
            continue
        if time.perf_counter() - started > args.time_limit_s:
            rows.append({"spec": prep["spec"], "skipped": "time limit"})
            continue
        try:
            row = _time(prep)
            row["fraction_of_copy_bw"] = row["bytes"] / (row["cand_ms"] * 1e-3) / 1e9 / bw
        except Exception:
            row = {"spec": prep["spec"], "error": traceback.format_exc()[-600:]}
        rows.append(row)
        if "error" in row:
            print(f"{row['spec']:<26} ERROR {row['error'][-200:]}", flush=True)
        else:
            print(f"{row['spec']:<26} x{row['scale']:<4} eager {row['eager_ms']*1e3:7.1f}us "
                  f"(dev {row['eager_dev_ms']*1e3:7.1f}, {row['eager_launches']}k) cand {row['cand_ms']*1e3:7.1f}us "
                  f"(dev {row['cand_dev_ms']*1e3:7.1f}, {row['cand_launches']}k) {row['speedup']:.2f}x "
                  f"dev {row['dev_speedup']:.2f}x bw {row['fraction_of_copy_bw']*100:.0f}%", flush=True)
        torch.cuda.empty_cache()
    write_json(args.out / f"profile_{args.tag}.json",
               {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "copy_bandwidth_gbps": bw,
                "target_elements": args.target_elements, "rows": rows})
    print(f"copy bandwidth {bw:.0f} GB/s; {fingerprint()}")


if __name__ == "__main__":
    main()
