"""Shared pieces of the GPU benchmarks. Needs torch, triton, numpy and protobuf (and, for
the in-process search sessions, grpcio, pyyaml and structlog), so it runs on a GPU host
where the service stack's clients (NATS, S3, Qdrant) are not installed."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for sub in ("libs", "cli", "services/evaluator", "services/synthesizer", "services/search", "services/gateway",
            "services/knowledge"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)

GPU_SUFFIX = """

# --- benchmark sizing: use the spec's GPU-sized inputs when it declares them ---
if "get_gpu_inputs" in globals():
    get_inputs = get_gpu_inputs  # noqa: F811
if "get_gpu_init_inputs" in globals():
    get_init_inputs = get_gpu_init_inputs  # noqa: F811
"""

SCALE_SUFFIX = """

# --- benchmark sizing: the batch dimension repeated {factor}x (tensors whose first
# dimension is the first input's), so the same operator runs at GPU-scale sizes ---
_bench_unscaled_get_inputs = get_inputs


def get_inputs():  # noqa: F811
    import torch as _torch

    xs = _bench_unscaled_get_inputs()
    first = next((x for x in xs if isinstance(x, _torch.Tensor) and x.dim() >= 1), None)
    n0 = first.shape[0] if first is not None else -1
    return [x.repeat({factor}, *([1] * (x.dim() - 1)))
            if isinstance(x, _torch.Tensor) and x.dim() >= 1 and x.shape[0] == n0 else x for x in xs]
"""

# Largest input tensor after scaling: 2**23 fp32 elements (32 MB), a size where memory-bound
# kernels run for tens of microseconds on an H100, past launch overhead.
TARGET_ELEMENTS = 2**23
MAX_FACTOR = 512


def gpu_variant(source: str) -> str:
    """The spec at realistic GPU sizes: ``get_gpu_inputs``/``get_gpu_init_inputs`` when
    declared, else unchanged (use ``scaled_variant`` for generic batch scaling)."""
    return source + GPU_SUFFIX


def scaled_variant(source: str, factor: int) -> str:
    return source if factor <= 1 else source + SCALE_SUFFIX.format(factor=factor)


def pick_scale(source: str, device: str = "cuda") -> int:
    """1 for a spec that declares ``get_gpu_inputs`` (its GPU sizes are final); else the
    largest power-of-two batch factor (<= MAX_FACTOR) that keeps the biggest input under
    TARGET_ELEMENTS and with which the reference still runs; 1 when scaling breaks it."""
    import torch

    if "def get_gpu_inputs" in source:  # the spec states its GPU sizes: take them as they are
        return 1
    mod = load_module("bench_probe", gpu_variant(source))
    torch.manual_seed(0)
    xs = mod.get_inputs()
    biggest = max((x.numel() for x in xs if isinstance(x, torch.Tensor)), default=0)
    factor = 1
    while factor * 2 <= MAX_FACTOR and biggest * factor * 2 <= TARGET_ELEMENTS:
        factor *= 2
    while factor > 1:
        try:
            scaled = load_module("bench_probe_scaled", scaled_variant(gpu_variant(source), factor))
            torch.manual_seed(0)
            model = scaled.Model(*scaled.get_init_inputs()).to(device)
            with torch.no_grad():
                model(*[x.to(device) if isinstance(x, torch.Tensor) else x for x in scaled.get_inputs()])
            return factor
        except Exception:  # a shape that is not a batch dimension: try smaller, then none
            factor //= 4
    return 1


def bench_source(raw: str, device: str) -> tuple[str, int]:
    """The spec as the benchmarks time it, and its batch factor: on a GPU its declared GPU
    inputs with the batch scaled as ``search_bench.py`` does (at the specs' CPU sizes most
    kernels run for a few microseconds, below launch overhead, and the speedups say more
    about the host than the kernel); elsewhere unchanged."""
    if device != "cuda":
        return raw, 1
    factor = pick_scale(raw, device)
    return scaled_variant(gpu_variant(raw), factor), factor


def time_side_by_side(fns: dict[str, Any], inputs: list[Any], device: str = "cuda",
                      compile_ref: Any = None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Contestants (label -> fn of the input list) timed interleaved on the same inputs with
    the judge's protocol (``ke_evaluator.worker.timing``: L2 flush, spin-covered CUDA events,
    rotating order, 20-200 rounds or a +-1 % CI, 20 s at most), plus
    ``torch.compile(compile_ref)`` as ``"compile"`` when given. Returns per label
    ``timing.summarize``'s summary, and ``compile_s`` or ``compile_error`` (a compile
    failure is data, not the end of the benchmark)."""
    import time

    import torch

    from ke_evaluator.worker import timing

    fns = dict(fns)
    info: dict[str, Any] = {}
    if compile_ref is not None:
        t0 = time.perf_counter()
        try:
            compiled = torch.compile(compile_ref)
            compiled(*inputs)
            info["compile_s"] = time.perf_counter() - t0
            fns["compile"] = lambda xs: compiled(*xs)
        except Exception as exc:
            info["compile_error"] = repr(exc)[:300]
    policy = timing.TimingPolicy(min_trials=20, max_trials=200, ci_target=0.01, budget_s=20.0, warmup=5)
    parts: list[tuple[list[float], list[float]]] = []
    samples = timing.interleaved_many(list(fns.values()), [inputs], timing.Timer(torch.device(device)), policy,
                                      parts=parts)
    return ({label: timing.summarize(sample, dev, host)
             for label, sample, (dev, host) in zip(fns, samples, parts, strict=True)}, info)


def contestants(spec_source: str, sources: dict[str, str], device: str,
                prefix: str) -> tuple[Any, dict[str, Any], list[Any]]:
    """The spec's reference model, each candidate's ``ModelNew`` (same seed; the reference's
    state loaded where the names match) and one input set, on ``device``."""
    import torch

    spec = load_module(f"{prefix}_spec", spec_source)
    init = spec.get_init_inputs()
    torch.manual_seed(1234)
    ref = spec.Model(*init).to(device)
    models: dict[str, Any] = {}
    for label, src in sources.items():
        mod = load_module(f"{prefix}_{label}", src)
        torch.manual_seed(1234)
        new = mod.ModelNew(*init).to(device)
        if set(new.state_dict()) == set(ref.state_dict()):
            new.load_state_dict(ref.state_dict())
        models[label] = new
    torch.manual_seed(7)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in spec.get_inputs()]
    return ref, models, inputs


def against_eager(spec_source: str, sources: dict[str, str], device: str, prefix: str) -> dict[str, Any]:
    """Each candidate's largest error against the reference (after one call first: a
    CUDA-graph candidate captures on it) and, on CUDA, the device, host enqueue and per-call
    median times of eager, torch.compile and every candidate timed side by side
    (``<label>_device_ms``, ``_host_ms``, ``_per_call_ms``); ``timed`` says whether they were."""
    import torch

    ref, models, inputs = contestants(spec_source, sources, device, prefix)
    out: dict[str, Any] = {}
    with torch.no_grad():
        expected = ref(*inputs)
        for label, new in models.items():
            new(*inputs)
            out[f"{label}_max_abs_error"] = max_error(new(*inputs), expected)
        if device != "cuda":
            out["timed"] = False
            return out
        summaries, info = time_side_by_side({"eager": lambda xs: ref(*xs),
                                             **{label: (lambda xs, m=m: m(*xs)) for label, m in models.items()}},
                                            inputs, compile_ref=ref)
        if "compile_error" in info:
            out["compile_error"] = info["compile_error"]
        for label, summary in summaries.items():
            out[f"{label}_device_ms"] = summary["device_median_ms"]
            out[f"{label}_host_ms"] = summary["host_median_ms"]
            out[f"{label}_per_call_ms"] = summary["per_call_median_ms"]
        out["timed"] = True
    torch._dynamo.reset()
    return out


def max_error(got: Any, expected: Any) -> float:
    """Largest absolute difference over tensors and (nested) tuples / lists of them; NaN
    for anything else."""
    import math

    import torch

    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
        return float((got.double() - expected.double()).abs().max().item())
    if isinstance(got, (tuple, list)) and isinstance(expected, (tuple, list)):
        return max((max_error(g, e) for g, e in zip(got, expected, strict=True)), default=0.0)
    return math.nan


def load_module(name: str, source: str) -> types.ModuleType:
    """Import source from a real file: Triton reads kernel source through ``inspect``."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ke-bench-"))
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def fingerprint() -> dict[str, Any]:
    import torch
    import triton

    fp: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                          "triton": triton.__version__}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        fp.update(gpu=props.name, sms=props.multi_processor_count, cuda=torch.version.cuda,
                  memory_gib=round(props.total_memory / 2**30, 1))
    return fp


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))


def add_example_arguments(ap: argparse.ArgumentParser) -> None:
    """--out, --specs, --target-elements and --jobs (host processes lowering candidates)."""
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--specs", default="all", help="comma-separated example names, or all")
    ap.add_argument("--target-elements", type=int, default=TARGET_ELEMENTS)
    ap.add_argument("--jobs", type=int, default=8, help="host processes lowering candidates")


def whole_model_arguments(specs: tuple[str, ...]) -> argparse.ArgumentParser:
    """A parser with --out, --specs (default ``specs``) and --time-limit-s, for scripts
    that walk example specs until a time limit."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results")))
    ap.add_argument("--specs", default=",".join(specs))
    ap.add_argument("--time-limit-s", type=float, default=540.0, help="stop starting new specs after this")
    return ap


def interpreter_without_cuda() -> str:
    """"cuda" when a GPU is visible; else "cpu", with Triton's interpreter switched on."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return "cpu"


# example specs: our operators, then the same kinds of specs written in other people's styles
EXAMPLE_DIRS = (ROOT / "examples" / "ops", ROOT / "examples" / "styles")
# specs at the sizes people run them (4-12 GB inputs, 50-layer nets): never part of "all",
# whose scripts run the reference on the host; only real_size_verdicts.py takes them.
LARGE_DIR = ROOT / "examples" / "large"


def large_names(specs: str) -> list[str]:
    """``large`` (every spec of examples/large), ``large+all`` (those, then every example at
    its GPU size), or comma-separated names of either folder."""
    every = sorted(p.stem for p in LARGE_DIR.glob("*.py"))
    if specs == "large":
        return every
    if specs == "large+all":
        return every + example_names("all")
    return [n for n in specs.split(",") if n]


def spec_source(name: str) -> tuple[str, bool]:
    """The source a benchmark judges for spec ``name`` and whether it is a real-size spec:
    examples/large as written (its sizes are the point), any other example at its GPU size."""
    large = LARGE_DIR / f"{name}.py"
    if large.exists():
        return large.read_text(), True
    return gpu_variant(example_path(name).read_text()), False


def verdict_row(judge: Any, spec: str, source: str, cand_source: str) -> dict[str, Any]:
    """The judge's verdict on one candidate as a result row (status, reason, speedup, the
    candidate's median, the worker's stage seconds, wall seconds, max error, the phase
    limits it ran under and the reference cost they came from); an unusable spec at this
    size is a finding (``spec_error``), not the end of the benchmark."""
    from kernelevolve.errors import KernelEvolveError

    try:
        v = judge.evaluate(source, cand_source, candidate_id=f"{spec}-seed")
    except KernelEvolveError as exc:
        return {"status": "spec_error", "reason": str(exc)[:600]}
    t = v.candidate_timing
    return {"status": v.status, "reason": v.reason[:600], "speedup": v.speedup,
            "candidate_ms": t.median_ms if t else None, "stage_s": v.evidence.get("stage_s"),
            "wall_s": v.evidence.get("wall_s"), "phase_limits": v.evidence.get("phase_limits"),
            "max_abs_error": v.correctness.max_abs_error if v.correctness else None,
            **job_memory(v.evidence.get("memory") or {}),
            "evidence_keys": sorted(v.evidence)}


def job_memory(memory: dict[str, Any]) -> dict[str, Any]:
    """The worker's own peak for this job (``evidence["memory"]``: the allocator's peak on a
    GPU, whatever other workers held), whole and per phase, in GiB; empty where the job
    measured nothing."""
    gib = 2.0**30
    out: dict[str, Any] = {}
    if memory.get("job_peak_bytes"):
        out["job_peak_gib"] = round(memory["job_peak_bytes"] / gib, 3)
        out["job_peak_method"] = memory.get("method", "")
    if memory.get("phase_peak_bytes"):
        out["phase_peak_gib"] = {k: round(b / gib, 3) for k, b in memory["phase_peak_bytes"].items()}
    return out


def example_path(name: str) -> Path:
    """The spec file of example ``name``, in whichever of EXAMPLE_DIRS holds it."""
    for folder in EXAMPLE_DIRS:
        if (folder / f"{name}.py").exists():
            return folder / f"{name}.py"
    return EXAMPLE_DIRS[0] / f"{name}.py"


def example_names(specs: str) -> list[str]:
    """``all``; ``sample:K``, K names evenly spaced over the sorted list of all (a subset
    fixed by rule, not picked by hand); or comma-separated names."""
    if specs.startswith("sample:"):
        every = example_names("all")
        k = max(1, min(int(specs.split(":", 1)[1]), len(every)))
        return [every[(i * len(every)) // k] for i in range(k)]
    if specs != "all":
        return [n for n in specs.split(",") if n]
    return sorted(p.stem for folder in EXAMPLE_DIRS for p in folder.glob("*.py"))
