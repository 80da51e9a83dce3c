"""Dot precision: the ``precision`` knob of the families that call ``tl.dot`` (matmul,
attention, conv), which choices a group may take and what the generated source says
about each."""

from __future__ import annotations

import torch

from kernelevolve.errors import LoweringError

from ..frontend.captured import CapturedSpec

# tl.dot input precision of fp32 operands (matmul, attention and conv groups). tf32x3
# sums three TF32 tensor-core products (a_hi*b_hi + a_hi*b_lo + a_lo*b_hi): close to fp32
# accuracy, on tensor cores instead of FMA units, so it is the default for fp32 operands.
# dot_precisions narrows the list per group: ieee only (as before) for fp16 / bf16
# operands, and tf32 only when the spec opts in (see spec_allows_tf32).
DOT_PRECISIONS = ("tf32x3", "ieee", "tf32")

# TF32 keeps 10 mantissa bits: products are off by ~1e-3 relative, so it is only offered
# when the spec's KE_TOLERANCE is at least this loose on both atol and rtol, and the spec
# turns the judge's float64 error budget off (KE_ERROR_BUDGET = False): that budget is a
# multiple of eager fp32's error, which TF32 exceeds ~100x (every TF32 candidate of
# linear_tf32_tolerant was judged incorrect by it on an H200, bench/RESULTS.md).
TF32_MIN_TOLERANCE = 5e-3


def spec_allows_tf32(spec: CapturedSpec) -> bool:
    tol = spec.tolerance
    return spec.error_budget_off and min(tol.get("atol", 0.0), tol.get("rtol", 0.0)) >= TF32_MIN_TOLERANCE


def dot_precisions(spec: CapturedSpec, dtype: torch.dtype | None) -> list[str]:
    """Allowed ``precision`` choices of a matmul / attention / conv group (see
    DOT_PRECISIONS): tf32x3 (the default) and ieee for fp32 operands, ieee for
    fp16 / bf16 ones; tf32 only when the spec declares a loose tolerance."""
    out = ["tf32x3", "ieee"] if dtype == torch.float32 else ["ieee"]
    return out + (["tf32"] if spec_allows_tf32(spec) else [])


# what the generated kernels say about a non-ieee dot (the ieee source is unchanged)
_DOT_NOTES = {
    "tf32x3": "tf32x3: three TF32 tensor-core products (a_hi*b_hi + a_hi*b_lo + a_lo*b_hi), close to fp32",
    "tf32": "tf32: one TF32 tensor-core product (10-bit mantissa), allowed by the spec's tolerance",
}


def dot_precision(precision: str) -> tuple[str, list[str]]:
    """A group's ``precision`` knob value, checked against DOT_PRECISIONS, and comment lines
    for the kernel source. Shared by the matmul, attention and conv generators."""
    if precision not in DOT_PRECISIONS:
        raise LoweringError(f"unknown dot precision {precision!r}")
    return precision, [f"# {_DOT_NOTES[precision]}"] if precision in _DOT_NOTES else []
