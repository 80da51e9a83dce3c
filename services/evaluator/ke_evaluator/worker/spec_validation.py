"""Spec validation inside the worker: the reference runs, inputs vary with the seed, and the
tolerance actually separates right from wrong answers (signal floor). A reference that
runs out of memory inside the worker's limits is reported as ``resource_limited`` (the
spec is valid; this evaluator is too small for it), never as a broken spec.

Worker side: torch only.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Any

import torch

from .. import resource_limits
from . import diagnosis, loading, memory, output_checks, precision, tolerance
from .global_state import set_precision_flags

PhaseFn = Callable[[str], None]


def _describe(obj: Any) -> list[dict[str, Any]]:
    return [
        {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")} if isinstance(t, torch.Tensor)
        else {"value": repr(t)[:80]}
        for t in output_checks.leaves(obj)
    ]


NOTHING_TO_COMPUTE = "nothing to compute: the reference only reshapes its inputs"


def only_views(out: Any, inputs: list[Any], model: torch.nn.Module) -> str:
    """Non-empty (what it returns, in words) when every tensor the reference returns is a
    view of one of its inputs, parameters or buffers (reshape, permute, split, a slice, the
    input itself): there is nothing to compute."""
    tensors = [t for t in output_checks.leaves(out) if isinstance(t, torch.Tensor)]
    sources = [t for t in output_checks.leaves(inputs) if isinstance(t, torch.Tensor)]
    sources += list(model.parameters()) + list(model.buffers())
    if not tensors or not any(t.numel() for t in tensors):
        return ""
    for t in tensors:
        if t.numel() and not any(s.numel() and output_checks.overlaps(t, s) for s in sources):
            return ""
    n = len(tensors)
    return "its output is a view of its inputs" if n == 1 else f"each of its {n} outputs is a view of its inputs"


def memory_limit(device: torch.device) -> tuple[int | None, str, str]:
    """(bytes, name, remedy) of the memory limit the worker runs under."""
    if device.type == "cuda":
        return (int(torch.cuda.get_device_properties(device).total_memory), "device memory",
                "use a GPU with more memory or smaller inputs")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limit = None if soft == resource.RLIM_INFINITY else int(soft)
    return (limit, "worker address space (evaluator.sandbox.memory_limit_bytes)",
            "raise evaluator.sandbox.memory_limit_bytes (or give the machine more memory) or use smaller inputs")


def validate(job: dict[str, Any], scratch: str, device: torch.device, cache: dict[str, loading.LoadedSpec],
             phase: PhaseFn) -> dict[str, Any]:
    try:
        return _validate(job, scratch, device, cache, phase)
    except Exception as exc:
        if not resource_limits.is_memory_error(exc):
            raise
        limit, name, remedy = memory_limit(device)
        return {"ok": False, "resource_limited": True, "warnings": [], "info": {},
                "reason": resource_limits.describe("the reference", f"{type(exc).__name__}: {exc}", limit, name,
                                                   remedy)}


def _validate(job: dict[str, Any], scratch: str, device: torch.device, cache: dict[str, loading.LoadedSpec],
              phase: PhaseFn) -> dict[str, Any]:
    warnings: list[str] = []
    info: dict[str, Any] = {}
    # The import runs under the parent's import limit (phase_limits, "import"): a spec whose
    # module-level code never returns ends there, not at the compile and run limits.
    try:
        spec = precision.import_spec(
            lambda: loading.load_spec(job["spec_source"], job.get("spec_name", ""), f"{scratch}/jobs", cache),
            loading.source_sha(job["spec_source"]))
    except loading.SpecError as exc:
        return {"ok": False, "reason": str(exc), "warnings": warnings, "info": info}
    phase("compile")
    info["precision"] = precision.enter_job(str(job.get("options", {}).get("precision") or "default"),
                                            spec.sha).to_dict()
    seed = int(job.get("options", {}).get("seed") or 0)
    try:
        init = spec.init_inputs()
        model = loading.build_model(spec.Model, init, seed, device)
    except Exception as exc:  # noqa: BLE001
        if resource_limits.is_memory_error(exc):
            raise
        return {"ok": False, "reason": f"Model(*get_init_inputs()) raised: {type(exc).__name__}: {exc}",
                "warnings": warnings, "info": info}
    phase("run")
    mem = memory.JobMemory(device)
    try:
        inputs = spec.inputs(seed + 1000, device)
        inputs_b = spec.inputs(seed + 1001, device)
        # Every call seeded as an evaluation seeds it (loading.seed_forward): a training-mode
        # dropout draws the same mask twice and is not reported nondeterministic.
        fseed = loading.forward_seed(seed)
        with torch.no_grad():
            ref_in = output_checks.clone_tree(inputs)
            with mem.reference():  # the reference's own peak: the admission's estimate needs it
                out, draws = loading.seeded_call(model, ref_in, fseed, device)
            views = only_views(out, ref_in, model)
            del ref_in
            out_again, _ = loading.seeded_call(model, output_checks.clone_tree(inputs), fseed, device)
        extra = spec.extra_inputs(seed + 5000, device)
        with torch.no_grad():
            extra_outs = [loading.seeded_call(model, output_checks.clone_tree(e), fseed, device)[0] for e in extra]
    except Exception as exc:  # noqa: BLE001
        if resource_limits.is_memory_error(exc):
            raise
        return {"ok": False, "reason": f"reference raised when run: {type(exc).__name__}: {exc}",
                "warnings": warnings, "info": info}
    tensors = [t for t in output_checks.leaves(out) if isinstance(t, torch.Tensor)]
    if not tensors:
        return {"ok": False, "reason": "reference output contains no tensor", "warnings": warnings, "info": info}
    if views:
        # Before any candidate: a kernel for it could only copy (the audit rejects that) or
        # launch nothing. Neither the spec's author's error nor a failure of ours: its own outcome.
        return {"ok": False, "nothing_to_compute": True, "warnings": warnings, "info": info,
                "reason": f"{NOTHING_TO_COMPUTE} ({views})"}
    info["inputs"] = _describe(inputs)
    info["outputs"] = _describe(out)
    info["parameters"] = int(sum(p.numel() for p in model.parameters()))
    info["extra_input_sets"] = len(extra)
    info["extra_outputs"] = [_describe(o) for o in extra_outs]
    info["bytes"] = (diagnosis.tensor_bytes(inputs) + diagnosis.tensor_bytes(list(model.parameters()))
                     + diagnosis.tensor_bytes(list(model.buffers())) + diagnosis.tensor_bytes(out))
    # What the memory admission predicts an evaluation's footprint from (the Judge's
    # Footprint.from_validation): sizes of one set, its outputs, the weights, the
    # reference's peak around one call, and the narrowest float width (float64 copies).
    mem.note(inputs, model, out)
    info["memory"] = {**mem.parts, "float_bytes": min(
        (t.element_size() for t in output_checks.leaves(inputs) if isinstance(t, torch.Tensor)
         and t.is_floating_point()), default=4)}
    info["flops"] = diagnosis.count_flops(lambda: model(*output_checks.clone_tree(inputs)))
    set_precision_flags()
    tol_dtype = tensors[0].dtype
    atol, rtol = tolerance.tolerance_for(tol_dtype, spec.tolerance)
    info["tolerance"] = {"atol": atol, "rtol": rtol, "overridden": spec.tolerance is not None}

    if any(bool(~torch.isfinite(t).all()) for t in tensors if t.is_floating_point()):
        warnings.append("reference output contains NaN or Inf")
    if draws:
        info["draws_random_numbers"] = True
        warnings.append("reference draws random numbers (training-mode dropout?): every forward call starts "
                        "from the same generator state, so a candidate must make the same draws in the same "
                        "order (keep such operations library calls)")
    if not tolerance.compare_values(out_again, out, None).ok:
        warnings.append("reference is nondeterministic on identical inputs")
        info["nondeterministic_reference"] = True
    in_tensors = [t for t in output_checks.leaves(inputs) if isinstance(t, torch.Tensor)]
    if in_tensors and all(torch.equal(a, b) for a, b in zip(in_tensors, output_checks.leaves(inputs_b), strict=False)
                          if isinstance(b, torch.Tensor)):
        warnings.append("get_inputs() returns the same values for every seed: fresh-input checks are void")

    for i, x in enumerate(in_tensors):
        if x.is_floating_point() and x.numel() > 1 and bool((x == x.flatten()[0]).all()):
            warnings.append(f"input {i} is constant ({float(x.flatten()[0]):g}): never time or check on such data")
    # Signal floor: answers that carry no information must fail the tolerance check.
    weak: list[str] = []
    # A zero scalar expanded to the output's shape: no output-sized copy (the comparison chunks).
    zeros = output_checks.map_tree(out, lambda t: t.new_zeros(()).expand_as(t))
    if tolerance.compare_values(zeros, out, spec.tolerance).ok:
        weak.append("an all-zeros output passes the tolerance check")
    for i, x in enumerate(in_tensors):
        if len(tensors) == 1 and x.shape == tensors[0].shape and x.dtype == tensors[0].dtype:
            if tolerance.compare_values(x, tensors[0], spec.tolerance).ok:
                weak.append(f"returning input {i} unchanged passes the tolerance check")
    peak = max((float(t.abs().max()) for t in tensors if t.is_floating_point() and t.numel()), default=0.0)
    info["output_max_abs"] = peak
    if tensors[0].is_floating_point() and peak < 10 * atol:
        weak.append(f"output magnitude {peak:.3g} is below 10x atol ({atol:g})")
    if weak:
        info["weak_signal"] = True
        warnings.extend(f"weak signal: {w}" for w in weak)
    else:
        info["weak_signal"] = False
    return {"ok": True, "reason": "", "warnings": warnings, "info": info}
