"""Lowering the offline synthesizer's seed at real size on the host: seconds and peak
resident memory per spec of examples/large (4-12 GB single ops, 50-layer CNNs, recurrent
models), each in a fresh child process (no device work).

    python bench/capture_real_size.py --out DIR [--specs a,b] [--timeout 600] [--file NAME]

Per spec: the tracer that captured it, ``lowering_s`` (``OfflineSynthesizer.propose``
with ``count=1``: capture, rewrites, plan, source), ``warmup_s`` (the child's one-time
imports of the fake-tensor machinery and the meta-device probe, paid once per process and
left out of ``lowering_s``), the peak resident set (``ru_maxrss``) and how much it grew
while lowering, the spec's input and parameter bytes (meta device), the seed's library
calls (``fallbacks``: the seed policy's choices included) and the nodes left to the library
with every conv / matmul started in Triton (``refused``). Summary: p50, p90
and max of ``lowering_s``. DIR/NAME (default capture_real_size.json) is rewritten after every spec.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

from common import fingerprint, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LARGE = ROOT / "examples" / "large"

# the child: warm the one-time imports, then lower one seed and report (one JSON line)
CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from torch._subclasses.fake_tensor import FakeTensorMode
FakeTensorMode()
from kernelevolve import spec_probe
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest
source, name = sys.stdin.read(), sys.argv[1]
size = spec_probe.measure(source, forward=False)
synth = OfflineSynthesizer()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t1 = time.perf_counter()
prop = synth.propose(ProposalRequest(spec_source=source, spec_name=name, count=1))[0]
t2 = time.perf_counter()
spec = synth.captured(source, name)
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# what the synthesizer cannot lower, apart from the seed policy's chosen library calls (a
# model's convolutions): every heavy node started in Triton
from ke_synthesizer.offline.families.impl_policy import ImplPolicy
triton_only = OfflineSynthesizer(policy=ImplPolicy(library_when_several=frozenset()))
refused = triton_only.propose(ProposalRequest(spec_source=source, spec_name=name, count=1))[0].fallback_nodes
print(json.dumps({"spec": name, "tracer": spec.tracer, "lowering_s": round(t2 - t1, 2),
                  "warmup_s": round(t1 - t0, 2), "peak_rss_mib": round(rss1 / 1024),
                  "rss_growth_mib": round((rss1 - rss0) / 1024), "input_bytes": size.input_bytes,
                  "param_bytes": size.param_bytes, "fallbacks": len(prop.fallback_nodes),
                  "refused": len(refused)}))
"""


def lower_one(path: Path, timeout_s: float) -> dict[str, Any]:
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, path.stem], input=path.read_text(), text=True,
                              capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"spec": path.stem, "error": f"over {timeout_s:.0f}s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"spec": path.stem, "error": proc.stderr[-600:]}
    row: dict[str, Any] = json.loads(lines[-1])
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    times = sorted(r["lowering_s"] for r in rows if "lowering_s" in r)
    if not times:
        return {}
    p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
    return {"lowered": len(times), "failed": len(rows) - len(times), "p50_s": statistics.median(times),
            "p90_s": p90, "max_s": times[-1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--specs", default="", help="comma-separated names of examples/large (default: all)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per spec")
    ap.add_argument("--file", default="capture_real_size.json", help="result file name under --out")
    args = ap.parse_args()
    wanted = {s for s in args.specs.split(",") if s}
    paths = [p for p in sorted(LARGE.glob("*.py")) if not wanted or p.stem in wanted]
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "host": fingerprint(), "rows": []}
    for path in paths:
        row = lower_one(path, args.timeout)
        result["rows"].append(row)
        result["summary"] = summary(result["rows"])
        write_json(args.out / args.file, result)
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    sys.stdout.write(json.dumps(result["summary"]) + "\n")


if __name__ == "__main__":
    main()
