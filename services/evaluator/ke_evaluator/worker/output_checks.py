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


class Spans(list[tuple[int, int]]):
    """Storage spans of a call's input tensors: enough to check aliasing after the tensors
    themselves are freed (an output that aliases one keeps its storage alive)."""


def spans(inputs: Any) -> Spans:
    return Spans(storage_span(t) for t in leaves(inputs) if isinstance(t, torch.Tensor) and t.numel())


def check_structure(out: Any, ref: Any, inputs: list[Any], strict_strides: bool = True,
                    allow_input_alias: bool = False, device_type: str | None = None) -> str:
    """Return '' when ``out`` is structurally acceptable, else a reason. Aliasing an input is
    allowed only when the reference itself returns a view of its input (``allow_input_alias``).
    ``inputs``: the call's input tree or its ``spans``. ``device_type``: where the output
    must be (default: the reference's device; the harness may keep its reference on the
    host while the outputs belong on the device)."""
    out_leaves, ref_leaves = leaves(out), leaves(ref)
    if isinstance(ref, torch.Tensor) and type(out) is not torch.Tensor:
        return f"output must be a plain torch.Tensor, got {type(out).__module__}.{type(out).__qualname__}"
    if len(out_leaves) != len(ref_leaves):
        return f"output structure differs: {len(out_leaves)} leaves vs reference {len(ref_leaves)}"
    in_spans = inputs if isinstance(inputs, Spans) else spans(inputs)
    for i, (o, r) in enumerate(zip(out_leaves, ref_leaves, strict=False)):
        where = f"output[{i}]" if len(ref_leaves) > 1 else "output"
        if isinstance(r, torch.Tensor):
            if type(o) is not torch.Tensor:
                return f"{where} must be a plain torch.Tensor, got {type(o).__module__}.{type(o).__qualname__}"
            if tuple(o.shape) != tuple(r.shape):
                return f"{where} shape {tuple(o.shape)} != reference {tuple(r.shape)}"
            if o.dtype != r.dtype:
                return f"{where} dtype {o.dtype} != reference {r.dtype}"
            want = device_type or r.device.type
            if o.device.type != want:
                return f"{where} device {o.device} != reference {want}"
            if o.requires_grad and not r.requires_grad:
                pass  # harmless; compared detached
            if strict_strides and r.numel() > 1 and o.stride() != r.stride():
                # A contiguous answer to a non-contiguous reference is accepted (warned by caller);
                # anything else means the consumer would read the wrong elements.
                if not (o.is_contiguous() and not r.is_contiguous()):
                    return f"{where} strides {o.stride()} != reference {r.stride()}"
            for j, (x0, x1) in enumerate([] if allow_input_alias else in_spans):
                o0, o1 = storage_span(o)
                if o.numel() and o0 < x1 and x0 < o1 and o1 > o0:
                    return f"{where} aliases input {j} (shares its storage); return new memory"
        elif isinstance(r, (int, float, bool, str, type(None))):
            if o != r and not (isinstance(r, float) and isinstance(o, float) and math.isnan(r) and math.isnan(o)):
                return f"{where} value {o!r} != reference {r!r}"
    return ""


def aliases_any(out: Any, inputs: list[Any]) -> bool:
    ins = [t for t in leaves(inputs) if isinstance(t, torch.Tensor) and t.numel()]
    return any(overlaps(o, x) for o in leaves(out) if isinstance(o, torch.Tensor) and o.numel() for x in ins)


# Elements per piece of ``bitwise_equal``: a few MiB of temporaries, whatever the tensors.
EQUAL_CHUNK = 1 << 21


def _pieces(x: torch.Tensor, y: torch.Tensor, limit: int) -> Any:
    """Equal flat pieces of two equally shaped tensors, the second's moved to the first's
    device (a copy of one piece): views of contiguous tensors, row slices otherwise."""
    if x.is_contiguous() and y.is_contiguous():
        fx, fy = x.reshape(-1), y.reshape(-1)
        for s in range(0, fx.numel(), limit):
            yield fx[s:s + limit], fy[s:s + limit].to(x.device)
        return
    if x.dim() == 0 or x.numel() <= limit or x.shape[0] == 1:
        if x.dim() > 0 and x.shape[0] == 1 and x.numel() > limit:
            yield from _pieces(x[0], y[0], limit)
            return
        yield x.reshape(-1), y.reshape(-1).to(x.device)
        return
    step = max(1, limit // max(1, x.numel() // x.shape[0]))
    for s in range(0, x.shape[0], step):
        yield from _pieces(x.narrow(0, s, min(step, x.shape[0] - s)), y.narrow(0, s, min(step, y.shape[0] - s)),
                           limit)


def tensors_equal(x: torch.Tensor, y: torch.Tensor, limit: int = EQUAL_CHUNK) -> bool:
    """Same shape, dtype and values (NaN equal to NaN: same bits in, same bits out), piece by
    piece: no copy of either tensor, on whichever devices they are."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    for a, b in _pieces(x.detach(), y.detach(), limit):
        if x.is_floating_point():
            na, nb = torch.isnan(a), torch.isnan(b)
            if not torch.equal(na, nb) or not torch.equal(a.masked_fill(na, 0.0), b.masked_fill(nb, 0.0)):
                return False
        elif not torch.equal(a, b):
            return False
    return True


def bitwise_equal(a: Any, b: Any) -> bool:
    for x, y in zip(leaves(a), leaves(b), strict=False):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if not tensors_equal(x, y):
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
