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


# The request's precision contract (ProposalRequest.precision): what eager PyTorch may use
# on the user's machine, so what a candidate may use too. "default" is PyTorch's defaults:
# torch.backends.cudnn.allow_tf32 is True (cuDNN convolutions and recurrent layers take TF32
# tensor cores), torch.backends.cuda.matmul.allow_tf32 is False (cuBLAS matmuls do not);
# "tf32" allows both, "strict" neither (plain IEEE fp32 dots only).
CONTRACTS = ("default", "strict", "tf32")
DEFAULT_CONTRACT = "default"
# which library eager runs a family's products on: its TF32 flag is the one that applies
CUDNN, CUBLAS = "cudnn", "cublas"


def _tf32_by_contract(contract: str, library: str) -> bool:
    if contract not in CONTRACTS:
        raise LoweringError(f"unknown precision contract {contract!r} (one of {', '.join(CONTRACTS)})")
    return contract == "tf32" or (contract == "default" and library == CUDNN)


def dot_precisions(spec: CapturedSpec, dtype: torch.dtype | None, contract: str = DEFAULT_CONTRACT,
                   library: str = CUBLAS) -> list[str]:
    """Allowed ``precision`` choices of a matmul / attention / conv / recurrent group (see
    DOT_PRECISIONS): tf32x3 (the default) and ieee for fp32 operands, ieee for fp16 / bf16
    ones; tf32 where the contract lets eager's ``library`` use TF32 (convolutions under the
    default contract, everything under ``tf32``) or the spec declares a loose tolerance;
    ieee alone under ``strict``."""
    if contract == "strict":
        return ["ieee"]
    out = ["tf32x3", "ieee"] if dtype == torch.float32 else ["ieee"]
    loose = spec_allows_tf32(spec) or (dtype == torch.float32 and _tf32_by_contract(contract, library))
    return out + (["tf32"] if loose else [])


def dot_seed(dtype: torch.dtype | None, contract: str = DEFAULT_CONTRACT, library: str = CUBLAS) -> dict[str, str]:
    """The ``precision`` a group's seed takes where it is not the first allowed choice
    (``group.info["seed"]``): tf32 for fp32 products only under the ``tf32`` contract, ieee
    under ``strict``; nothing otherwise (tf32x3, the first choice).

    Under the default contract a convolution may use TF32 (tf32 is offered to the search),
    but its seed stays tf32x3: that cuDNN *may* use TF32 does not mean it does. On an H200
    (2026-11-28, bench/results/agreement_h200_after.json) eager's own error against float64
    was 1.6e-07 on conv2d_bias_relu and 9.5e-06 on a 2^31-element transposed convolution,
    fp32-level, while a TF32 Triton seed erred by 2.4e-03 and 1.4e-03: both seeds were judged
    incorrect by the float64 error budget. The search keeps tf32 where the judge accepts it
    (conv2d_bias_relu's best there was a correct 1.06x)."""
    if contract == "strict":
        return {"precision": "ieee"}
    return {"precision": "tf32"} if dtype == torch.float32 and contract == "tf32" else {}


# what the generated kernels say about a non-ieee dot (the ieee source is unchanged)
_DOT_NOTES = {
    "tf32x3": "tf32x3: three TF32 tensor-core products (a_hi*b_hi + a_hi*b_lo + a_lo*b_hi), close to fp32",
    "tf32": "tf32: one TF32 tensor-core product (10-bit mantissa), as the precision contract or the spec allows",
}


def dot_precision(precision: str) -> tuple[str, list[str]]:
    """A group's ``precision`` knob value, checked against DOT_PRECISIONS, and comment lines
    for the kernel source. Shared by the matmul, attention and conv generators."""
    if precision not in DOT_PRECISIONS:
        raise LoweringError(f"unknown dot precision {precision!r}")
    return precision, [f"# {_DOT_NOTES[precision]}"] if precision in _DOT_NOTES else []
