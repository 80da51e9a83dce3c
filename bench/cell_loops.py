"""Hand-written loops over time steps: the seed candidate's size and lowering time as the
sequence grows, on the host (no device work).

    python bench/cell_loops.py [--steps 8,64,512] [--root DIR] [--out FILE] [--timeout S]

Specs: ``examples/ops/model_lstm_cell_loop.py`` (``nn.LSTMCell`` over ``x[:, t]``),
``model_gru_cell_time_major.py`` (``nn.GRUCell`` over ``x.unbind(0)``) and
``model_lstm_unrolled.py`` (the gate math written out over ``x[:, t]``), each at every
sequence length of ``--steps``. Per (spec, T), in a fresh child process whose
``PYTHONPATH`` points at ``--root`` (default: this checkout; another checkout's code gives
the "before" numbers on the same specs): the tracer, ``@triton.jit`` functions defined in
the candidate, its size (bytes, lines), the kernel launches written in its forward
(``launch_`` calls, a loop body counted once), the nodes left to the library, and
``lowering_s`` (``OfflineSynthesizer.propose(count=1)``: capture, which runs the reference
forward and the traced graph, rewrites, plan, source). The child runs torch on one thread:
the host is shared, and tiny matmuls on several threads took 11 ms each under load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is a folder of scripts

from common import fingerprint, write_json  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "libs"))
from kernelevolve.spec_shrink import rewrite, size_constants  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "examples" / "ops"
PATHS = ("", "libs", "services/synthesizer")

CHILD = r"""
import json, re, sys, time
import torch
torch.set_num_threads(1)
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest
source, name = sys.stdin.read(), sys.argv[1]
synth = OfflineSynthesizer()
t0 = time.perf_counter()
prop = synth.propose(ProposalRequest(spec_source=source, spec_name=name, count=1))[0]
took = time.perf_counter() - t0
src = prop.source
forward = src[src.index("    def forward("):]
print(json.dumps({"tracer": synth.captured(source, name).tracer, "lowering_s": round(took, 2),
                  "jit_functions": len(re.findall(r"^@triton\.jit$", src, re.MULTILINE)),
                  "source_bytes": len(src), "source_lines": src.count("\n"),
                  "forward_launches": len(re.findall(r"\blaunch_\w+\(", forward)),
                  "fallbacks": len(prop.fallback_nodes)}))
"""


def at_length(name: str, steps: int) -> str:
    """The example's source with a sequence of ``steps`` time steps."""
    source = (OPS / f"{name}.py").read_text()
    if name == "model_lstm_unrolled":  # the length is a literal of get_inputs
        return source.replace("torch.randn(4, 6, IN_F)", f"torch.randn(4, {steps}, IN_F)")
    return rewrite(source, size_constants(source), {"SEQ_LEN": steps})


SPECS = ("model_lstm_cell_loop", "model_gru_cell_time_major", "model_lstm_unrolled")


def lower_one(root: Path, name: str, steps: int, timeout_s: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(root / p) for p in PATHS), OMP_NUM_THREADS="1")
    row: dict[str, Any] = {"spec": name, "steps": steps}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, name], input=at_length(name, steps), text=True,
                              capture_output=True, timeout=timeout_s, check=False, env=env)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"over {timeout_s:.0f}s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {**row, "error": proc.stderr[-600:]}
    return {**row, **json.loads(lines[-1])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="8,64,512")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose code lowers the specs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cell_loops.json")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (spec, T)")
    args = ap.parse_args()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "host": {**fingerprint(), "cpus": os.cpu_count()}, "rows": []}
    for name in SPECS:
        for steps in (int(s) for s in args.steps.split(",")):
            row = {**lower_one(args.root, name, steps, args.timeout),
                   "load_avg_1m": round(os.getloadavg()[0], 1)}  # the host is shared: read times with it
            result["rows"].append(row)
            write_json(args.out, result)
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
