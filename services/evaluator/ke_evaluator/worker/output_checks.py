"""Output checks other than values: structure/shape/dtype/stride/alias checks, tree helpers.
Values are judged by ``tolerance.py``.

Worker side: imports torch only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch


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
