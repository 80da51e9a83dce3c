"""Output comparison: tolerances by dtype, structure/shape/dtype/stride/alias checks.

Worker side: imports torch only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

# dtype -> (atol, rtol). fp32 tight; half types have ~3 decimal digits.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}
# Minimum error budget as a multiple of the dtype's machine epsilon (times output scale):
# a candidate may reorder reductions or use another exp/tanh formula and lose a few ulps.
ULP_FLOOR = 64.0


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> tuple[float, float]:
    atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    if override:
        atol = float(override.get("atol", atol))
        rtol = float(override.get("rtol", rtol))
    return atol, rtol


def map_tree(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tree(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: map_tree(v, fn) for k, v in obj.items()}
    return obj


def leaves(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return [x for o in obj for x in leaves(o)]
    if isinstance(obj, dict):
        return [x for k in sorted(obj) for x in leaves(obj[k])]
    return [obj]


def clone_tree(obj: Any) -> Any:
    # clone() keeps strides for dense tensors; detach so no autograd graph links runs.
    return map_tree(obj, lambda t: t.detach().clone())


def upcast64(obj: Any) -> Any:
    return map_tree(obj, lambda t: t.detach().to(torch.float64) if t.is_floating_point() else t.detach().clone())


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    try:
        st = t.untyped_storage()
        return st.data_ptr(), st.data_ptr() + st.nbytes()
    except RuntimeError:
        return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, a1 = storage_span(a)
    b0, b1 = storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def check_structure(out: Any, ref: Any, inputs: list[Any], strict_strides: bool = True,
                    allow_input_alias: bool = False) -> str:
    """Return '' when ``out`` is structurally acceptable, else a reason. Aliasing an input is
    allowed only when the reference itself returns a view of its input (``allow_input_alias``)."""
    out_leaves, ref_leaves = leaves(out), leaves(ref)
    if isinstance(ref, torch.Tensor) and type(out) is not torch.Tensor:
        return f"output must be a plain torch.Tensor, got {type(out).__module__}.{type(out).__qualname__}"
    if len(out_leaves) != len(ref_leaves):
        return f"output structure differs: {len(out_leaves)} leaves vs reference {len(ref_leaves)}"
    in_tensors = [t for t in leaves(inputs) if isinstance(t, torch.Tensor)]
    for i, (o, r) in enumerate(zip(out_leaves, ref_leaves, strict=False)):
        where = f"output[{i}]" if len(ref_leaves) > 1 else "output"
        if isinstance(r, torch.Tensor):
            if type(o) is not torch.Tensor:
                return f"{where} must be a plain torch.Tensor, got {type(o).__module__}.{type(o).__qualname__}"
            if tuple(o.shape) != tuple(r.shape):
                return f"{where} shape {tuple(o.shape)} != reference {tuple(r.shape)}"
            if o.dtype != r.dtype:
                return f"{where} dtype {o.dtype} != reference {r.dtype}"
            if o.device.type != r.device.type:
                return f"{where} device {o.device} != reference {r.device}"
            if o.requires_grad and not r.requires_grad:
                pass  # harmless; compared detached
            if strict_strides and r.numel() > 1 and o.stride() != r.stride():
                # A contiguous answer to a non-contiguous reference is accepted (warned by caller);
                # anything else means the consumer would read the wrong elements.
                if not (o.is_contiguous() and not r.is_contiguous()):
                    return f"{where} strides {o.stride()} != reference {r.stride()}"
            for j, x in enumerate([] if allow_input_alias else in_tensors):
                if x.numel() and o.numel() and overlaps(o, x):
                    return f"{where} aliases input {j} (shares its storage); return new memory"
        elif isinstance(r, (int, float, bool, str, type(None))):
            if o != r and not (isinstance(r, float) and isinstance(o, float) and math.isnan(r) and math.isnan(o)):
                return f"{where} value {o!r} != reference {r!r}"
    return ""


def aliases_any(out: Any, inputs: list[Any]) -> bool:
    ins = [t for t in leaves(inputs) if isinstance(t, torch.Tensor) and t.numel()]
    return any(overlaps(o, x) for o in leaves(out) if isinstance(o, torch.Tensor) and o.numel() for x in ins)


def compare_values(out: Any, ref: Any, tol_override: dict[str, float] | None) -> Comparison:
    """Elementwise |out - ref| <= atol + rtol*|ref|, NaN only where the reference has NaN."""
    worst_abs = 0.0
    worst_rel = 0.0
    details: dict[str, Any] = {}
    for i, (o, r) in enumerate(zip(leaves(out), leaves(ref), strict=False)):
        if not isinstance(r, torch.Tensor):
            continue
        atol, rtol = tolerance_for(r.dtype, tol_override)
        details.setdefault("atol", atol)
        details.setdefault("rtol", rtol)
        if r.numel() == 0:
            continue
        if not r.is_floating_point() and not r.is_complex():
            if not torch.equal(o.detach().cpu(), r.detach().cpu()):
                return Comparison(False, f"output[{i}] integer/bool values differ", details=details)
            continue
        o64 = o.detach().to(torch.float64)
        r64 = r.detach().to(torch.float64)
        nan_o, nan_r = torch.isnan(o64), torch.isnan(r64)
        if bool((nan_o != nan_r).any()):
            n = int((nan_o & ~nan_r).sum())
            return Comparison(False, f"output[{i}] has {n} NaN where the reference has none"
                              if n else f"output[{i}] misses NaN the reference has", details=details)
        inf_mismatch = torch.isinf(r64) & (o64 != r64)
        if bool(inf_mismatch.any()):
            return Comparison(False, f"output[{i}] infinities differ from the reference", details=details)
        finite = torch.isfinite(r64)
        diff = (o64 - r64).abs().masked_fill(~finite, 0.0)
        limit = atol + rtol * r64.abs().masked_fill(~finite, 0.0)
        # Clamped so that the report stays strict JSON when the candidate produced inf.
        max_abs = min(float(diff.max()), 1e308)
        rel = diff / r64.abs().clamp_min(1e-12)
        max_rel = min(float(rel.masked_fill(~finite, 0.0).max()), 1e308)
        worst_abs = max(worst_abs, max_abs)
        worst_rel = max(worst_rel, max_rel)
        bad = diff > limit
        if bool(bad.any()):
            nbad = int(bad.sum())
            idx = int(torch.argmax((diff - limit).flatten()))
            return Comparison(
                False,
                f"output[{i}] mismatch: {nbad}/{r.numel()} elements outside atol={atol:g} rtol={rtol:g}; "
                f"max abs error {max_abs:.3g} (e.g. flat index {idx}: got {float(o64.flatten()[idx]):.6g}, "
                f"expected {float(r64.flatten()[idx]):.6g})",
                max_abs=max_abs,
                max_rel=max_rel,
                details=details,
            )
    return Comparison(True, "", worst_abs, worst_rel, details)


def max_error(out: Any, ref: Any) -> tuple[float, float]:
    """(max |out-ref|, max |ref|) over all floating leaves, in float64, on the reference's
    device with one host sync per leaf. (It copied both to the host first: 0.8 of the
    1.05 s a layernorm check took on an H100, bench/RESULTS.md.) Non-finite pairs count
    as zero here; compare_values judges them."""
    worst = 0.0
    scale = 0.0
    for o, r in zip(leaves(out), leaves(ref), strict=False):
        if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel():
            r64 = r.detach().to(torch.float64)
            o64 = o.detach().to(device=r64.device, dtype=torch.float64)
            finite = torch.isfinite(r64) & torch.isfinite(o64)
            zero = torch.zeros((), dtype=torch.float64, device=r64.device)
            both = torch.stack([torch.where(finite, (o64 - r64).abs(), zero).max(),
                                torch.where(finite, r64.abs(), zero).max()]).tolist()
            worst, scale = max(worst, both[0]), max(scale, both[1])
    return worst, scale


def bitwise_equal(a: Any, b: Any) -> bool:
    for x, y in zip(leaves(a), leaves(b), strict=False):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                # NaN == NaN for this purpose: same bits in, same bits out.
                if not torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)) or not torch.equal(
                    torch.isnan(x), torch.isnan(y)
                ):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def inputs_unchanged(before: list[Any], after: list[Any]) -> str:
    for i, (b, a) in enumerate(zip(before, after, strict=False)):
        if isinstance(b, torch.Tensor):
            if a.shape != b.shape or not bitwise_equal([a], [b]):
                return f"input {i} was modified in place by the candidate"
    return ""


def eps_of(dtype: torch.dtype) -> float:
    try:
        return float(torch.finfo(dtype).eps)
    except TypeError:
        return 0.0
