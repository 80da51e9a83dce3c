"""Which flash-attention configs of ``attention_plain`` fault or are wrong on this GPU:
every (BLOCK_M, BLOCK_N, num_warps, precision) at one stage, each config in its own
process (an illegal address poisons the CUDA context), checked against the reference on
the GPU-sized inputs and the spec's extra shapes. Prints the bad ones.

    python bench/attention_configs.py   (from the repository root)

Found space.FAULTY_ATTENTION_WARPS.
"""
import itertools
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path[:0] = ["libs", "services/synthesizer", "services/evaluator", "bench"]

CHILD = r'''
import sys, json, torch
sys.path[:0] = ["libs", "services/synthesizer", "services/evaluator", "bench"]
from common import load_module
src, cand = json.load(open(sys.argv[1]))
spec = load_module("s", src); c = load_module("c", cand)
torch.manual_seed(0)
res = {}
for shape_set in ("main", "extra"):
    xs = spec.get_inputs() if shape_set == "main" else spec.get_extra_inputs()[0]
    xs = [x.cuda() for x in xs]
    with torch.no_grad():
        want = spec.Model().cuda()(*xs); got = c.ModelNew().cuda()(*xs)
    torch.cuda.synchronize()
    res[shape_set] = float((got.double() - want.double()).abs().max())
print(json.dumps(res))
'''

def main():
    from common import gpu_variant, pick_scale, scaled_variant

    from ke_synthesizer.offline import OfflineSynthesizer, space

    space.FAULTY_ATTENTION_WARPS.clear()  # probe every config, the known-bad ones included
    raw = open("examples/ops/attention_plain.py").read()
    scale = pick_scale(raw)
    src = scaled_variant(gpu_variant(raw), scale)
    synth = OfflineSynthesizer()
    spec = synth._capture(src, "attention_plain")
    work = tempfile.mkdtemp(prefix="attention-configs-")
    child = os.path.join(work, "child.py")
    open(child, "w").write(CHILD)
    jobs = []
    grid = itertools.product(("16", "32", "64", "128"), ("16", "32", "64"), ("2", "4", "8"), ("1",),
                             ("tf32x3", "ieee"))
    for bm, bn, w, st, prec in grid:
        g = {"fusion": "greedy", "attention": "flash", "g0.BLOCK_M": bm, "g0.BLOCK_N": bn, "g0.num_warps": w,
             "g0.num_stages": st, "g0.precision": prec}
        source, full, _ = synth.lower(spec, g)
        path = os.path.join(work, f"{bm}_{bn}_{w}_{st}_{prec}.json")
        json.dump([src, source], open(path, "w"))
        jobs.append((g, path))
    def run(job):
        g, path = job
        p = subprocess.run([sys.executable, child, path], capture_output=True, text=True, timeout=300)
        out = p.stdout.strip().splitlines()
        return g, (out[-1] if p.returncode == 0 and out else "FAIL " + p.stderr.strip().splitlines()[-1][:160])
    with ThreadPoolExecutor(12) as ex:
        for g, r in ex.map(run, jobs):
            bad = r.startswith("FAIL") or max(json.loads(r).values()) > 1e-3
            if bad:
                print("BAD", g["g0.BLOCK_M"], g["g0.BLOCK_N"], g["g0.num_warps"], g["g0.precision"], r, flush=True)
    print(f"scale {scale}; {len(jobs)} configs probed")

if __name__ == "__main__":
    main()
