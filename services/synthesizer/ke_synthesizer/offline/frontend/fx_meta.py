"""Shape and dtype of fx nodes, as ShapeProp recorded them at capture time.

Every pass reads node metadata through these helpers; they depend on torch.fx (and the
recurrent layers' shape rule) alone, so any module of the package may import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from .recurrent import fake_output

# dtypes the generated kernels compute in (others keep torch's semantics: library calls)
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def tensor_meta(node: torch.fx.Node) -> Any:
    """The ShapeProp TensorMetadata of a node, or None for non-tensor values."""
    meta = node.meta.get("tensor_meta")
    if meta is not None and hasattr(meta, "shape"):
        return meta
    return None


def shape_of(node: Any) -> tuple[int, ...] | None:
    if isinstance(node, torch.fx.Node):
        meta = tensor_meta(node)
        if meta is not None:
            return tuple(int(s) for s in meta.shape)
    return None


def dtype_of(node: Any) -> torch.dtype | None:
    if isinstance(node, torch.fx.Node):
        meta = tensor_meta(node)
        if meta is not None:
            return meta.dtype
    return None


def is_tensor_node(v: Any) -> bool:
    return isinstance(v, torch.fx.Node) and tensor_meta(v) is not None


def propagate_shapes(gm: torch.fx.GraphModule, inputs: list[Any],
                     context: Callable[[], Any] = contextlib.nullcontext) -> None:
    """ShapeProp on ``inputs`` (no autograd) inside ``context``: the fake-tensor mode of a
    spec captured at real size (``CapturedSpec.shape_context``), so factory calls in the
    forward make fake tensors too and nothing is computed."""
    with context(), torch.no_grad():
        _ShapeProp(gm).propagate(*inputs)


class _ShapeProp(ShapeProp):
    """ShapeProp that gives a recurrent layer's outputs on fake tensors from its sizes
    (``recurrent.fake_output``) instead of stepping through time."""

    def call_module(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        out = None if kwargs else fake_output(self.fetch_attr(str(target)), tuple(args))
        return out if out is not None else super().call_module(target, args, kwargs)
