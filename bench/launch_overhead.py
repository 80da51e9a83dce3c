"""Host overhead of the offline synthesizer's default candidates: the Python work of
generated launchers and forward code per call.

CPU proxy (default, no GPU needed): every Triton kernel object in the candidate module
is replaced by a no-op that accepts ``kernel[grid](*args, **kw)`` and counts launches
and kernel arguments, then the forward runs on CPU tensors of the spec's inputs. The
reported time is launcher / forward Python (shape logic, views, allocation, argument
lists), i.e. everything except Triton's own launch path (whose binder cost grows with
the number of arguments: see the ``args`` column).

    python bench/launch_overhead.py [--specs a,b|all] [--calls 100] [--repeats 21] [--profile SPEC]

``--real`` (GPU host): real kernels on CUDA tensors at benchmark size (the same sizing as
``profile_seeds.py``); reports host enqueue time per forward (perf_counter over N calls,
no synchronisation) and wall time per forward with a synchronisation at the end.
``--real --device cpu`` runs the interpreted kernels on CPU (a smoke test of that path).

Before/after: ``--against DIR`` also lowers every spec with the ``ke_synthesizer``
package found in DIR (e.g. ``git archive HEAD services/synthesizer | tar -x -C /tmp/old``,
DIR = /tmp/old/services/synthesizer) and times both candidates in this process,
alternating repetitions, so machine noise hits both alike. ``--synth-path DIR`` lowers
the "current" side with another copy too. Candidates are generated in child processes
(one per package). ``--json PATH`` writes the rows.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import common
from common import gpu_variant, load_module, pick_scale, scaled_variant

# torch and triton are imported later: the proxy (and --real --device cpu) must never need
# a GPU driver
_DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv[:-1] else "cuda"
if "--real" not in sys.argv or _DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEFAULT_SPECS = ("layernorm_functional,leaky_affine,min_max_clamp,tanh_row_broadcast,relu_min_values,mse_plain,"
                 "huber_loss,hinge_plain,linear_bias_relu,model_mlp,maxpool2d_relu,sdpa_causal,gelu_residual,"
                 "kl_div_rows")


class NoOpKernel:
    """Stands in for a ``@triton.jit`` function: ``k[grid](*args, **kw)`` only counts."""

    def __init__(self, name: str, stats: dict[str, int]) -> None:
        self.__name__ = name
        self._stats = stats

    def __getitem__(self, grid: Any) -> Any:
        if callable(grid):  # a grid lambda gets the meta-parameters, as Triton's does
            stats = self._stats

            def launch(*args: Any, **kw: Any) -> None:
                grid(kw)
                stats["launches"] += 1
                stats["args"] += len(args)

            return launch
        return self._launch

    def _launch(self, *args: Any, **kw: Any) -> None:
        self._stats["launches"] += 1
        self._stats["args"] += len(args)


def _is_kernel(obj: Any) -> bool:
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - older triton
        InterpretedFunction = JITFunction  # noqa: N806
    return isinstance(obj, (JITFunction, InterpretedFunction))


def emit_sources(names: list[str], bench_size: bool, device: str) -> dict[str, dict[str, Any]]:
    """Child side: spec and default-candidate source of every spec (or the error)."""
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ProposalRequest

    synth = OfflineSynthesizer()
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            raw = common.example_path(name).read_text()
            scale, source = 1, raw
            if bench_size:
                scale = pick_scale(raw, device)
                source = scaled_variant(gpu_variant(raw), scale)
            prop = synth.propose(ProposalRequest(spec_source=source, spec_name=name, count=1,
                                                 hardware_kind="cuda" if bench_size else "cpu"))[0]
            out[name] = {"scale": scale, "source": source, "cand_source": prop.source}
        except Exception as exc:  # a spec that does not lower is a row, not a crash
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def sources_from(synth_path: str | None, names: list[str], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Candidates lowered by the ke_synthesizer in synth_path (default: this checkout), in
    a child process so that two packages of the same name never meet."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sources.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--emit-sources", str(out), "--specs", ",".join(names)]
        if synth_path:
            cmd += ["--synth-path", synth_path]
        if args.real:
            cmd += ["--real", "--device", args.device]
        subprocess.run(cmd, check=True)
        return json.loads(out.read_text())


def _batch(fn: Any, calls: int, sync: Any) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if sync is not None:
        sync()
    return (time.perf_counter() - t0) / calls * 1e6


class Subject:
    """One candidate ready to time: its forward as a closure, kernels no-op'ed in the proxy."""

    def __init__(self, tag: str, name: str, entry: dict[str, Any], args: argparse.Namespace) -> None:
        import torch

        self.device = args.device if args.real else "cpu"
        self.spec = load_module(f"lo_spec_{tag}_{name}", entry["source"])
        self.cand = load_module(f"lo_cand_{tag}_{name}", entry["cand_source"])
        self.stats = {"launches": 0, "args": 0}
        if not args.real:
            for attr, obj in list(vars(self.cand).items()):
                if _is_kernel(obj):
                    setattr(self.cand, attr, NoOpKernel(attr, self.stats))
        torch.manual_seed(0)
        self.model = self.cand.ModelNew(*self.spec.get_init_inputs()).to(self.device)
        torch.manual_seed(1)
        self.inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in self.spec.get_inputs()]
        self.sync = torch.cuda.synchronize if self.device == "cuda" else None
        self.samples: dict[str, list[float]] = {"host": [], "enqueue": [], "wall": []}
        for _ in range(10):  # warm up (and compile, on a GPU)
            self.fwd()
        if self.sync:
            self.sync()
        self.stats["launches"] = self.stats["args"] = 0
        self.fwd()
        self.per_forward = dict(self.stats)  # launches and kernel arguments of one forward

    def fwd(self) -> Any:
        return self.model(*self.inputs)

    def sample(self, args: argparse.Namespace) -> None:
        if not args.real:
            self.samples["host"].append(_batch(self.fwd, args.calls, None))
            return
        if self.sync:
            self.sync()
        self.samples["enqueue"].append(_batch(self.fwd, args.calls, None))
        if self.sync:
            self.sync()
        self.samples["wall"].append(_batch(self.fwd, args.calls, self.sync or (lambda: None)))

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, xs in self.samples.items():
            if xs:
                out[f"{key}_us"], out[f"{key}_min_us"] = statistics.median(xs), min(xs)
        if out.get("host_us") is not None:
            out.update(self.per_forward)
        return out


def measure(name: str, current: dict[str, Any], against: dict[str, Any] | None,
            args: argparse.Namespace) -> dict[str, Any]:
    import torch

    row: dict[str, Any] = {"spec": name, "scale": current.get("scale", 1)}
    subjects = {"after": Subject("a", name, current, args)}
    if against is not None and "error" not in against:
        subjects["before"] = Subject("b", name, against, args)
    with torch.no_grad():
        for _ in range(args.repeats):  # alternate, so noise hits both sides alike
            for s in subjects.values():
                s.sample(args)
        if args.profile == name:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                subjects["after"].fwd()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    row.update(subjects["after"].row())
    if "before" in subjects:
        row["before"] = subjects["before"].row()
    return row


def _fmt(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['spec']:<24} ERROR {row['error']}"
    key = "host" if "host_us" in row else "enqueue"
    text = (f"{row['spec']:<24} x{row['scale']:<4} {key} {row[key + '_us']:7.1f} us/forward "
            f"(min {row[key + '_min_us']:6.1f})")
    if key == "enqueue":
        text += f"  wall (sync) {row['wall_us']:7.1f} (min {row['wall_min_us']:6.1f})"
    else:
        text += f"  launches {row['launches']}  kernel args {row['args']}"
    b = row.get("before")
    if b:
        text += f"  | before {b[key + '_min_us']:7.1f}, {b[key + '_min_us'] / row[key + '_min_us']:5.2f}x faster"
        if key == "host":
            text += f"  (launches/args {b['launches']}/{b['args']} -> {row['launches']}/{row['args']})"
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", default=DEFAULT_SPECS, help="comma-separated example names, or 'all'")
    ap.add_argument("--calls", type=int, default=100, help="forwards per timed repetition")
    ap.add_argument("--repeats", type=int, default=21, help="timed repetitions (median and min reported)")
    ap.add_argument("--real", action="store_true", help="GPU host: real kernels on CUDA tensors")
    ap.add_argument("--device", default="cuda", help="with --real: cuda (benchmark sizes) or cpu (interpreted "
                    "kernels at the spec's sizes: a smoke test of this path)")
    ap.add_argument("--profile", default="", help="print a cProfile of this spec's forward")
    ap.add_argument("--synth-path", help="directory holding the ke_synthesizer package to measure")
    ap.add_argument("--against", help="directory holding a ke_synthesizer package to compare with (before)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--emit-sources", type=Path, help=argparse.SUPPRESS)  # child mode, see sources_from
    args = ap.parse_args()
    names = common.example_names(args.specs)
    bench_size = args.real and args.device == "cuda"
    if args.emit_sources:
        if args.synth_path:
            sys.path.insert(0, args.synth_path)
        args.emit_sources.write_text(json.dumps(emit_sources(names, bench_size, args.device)))
        return
    current = sources_from(args.synth_path, names, args)
    against = sources_from(args.against, names, args) if args.against else {}
    rows = []
    for name in names:
        try:
            if "error" in current[name]:
                raise RuntimeError(current[name]["error"])
            row = measure(name, current[name], against.get(name) if args.against else None, args)
        except Exception as exc:
            row = {"spec": name, "error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
        rows.append(row)
        print(_fmt(row), flush=True)
    if args.json:
        common.write_json(args.json, {"date": time.strftime("%Y-%m-%d"), "fingerprint": common.fingerprint(),
                                      "mode": "real" if args.real else "proxy", "calls": args.calls,
                                      "repeats": args.repeats, "against": args.against, "rows": rows})


if __name__ == "__main__":
    main()
