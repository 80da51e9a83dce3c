"""Shape and dtype of fx nodes, as ShapeProp recorded them at capture time.

Every pass reads node metadata through these helpers; they depend on torch.fx (and the
fake-tensor shape rules of fake_rules.py) alone, so any module of the package may import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from .fake_rules import fake_module_output

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
                     context: Callable[[], Any] = contextlib.nullcontext, new_only: bool = False) -> None:
    """ShapeProp on ``inputs`` (no autograd) inside ``context``: the fake-tensor mode of a
    spec captured at real size (``CapturedSpec.shape_context``), so factory calls in the
    forward make fake tensors too and nothing is computed.

    ``new_only`` (fake tensors only: no values to lose): a node that already holds one
    tensor's metadata is not run again, its value is an empty tensor of that metadata; the
    nodes a rewrite added are. On fake tensors every op goes through the fake dispatcher
    (~2 ms each on a loaded 2-core host): propagating all of densenet_blocks again after its
    batch norms were rewritten cost 3.6 s, the new nodes alone a fraction of it."""
    with context(), torch.no_grad():
        _ShapeProp(gm, new_only).propagate(*inputs)


class _ShapeProp(ShapeProp):
    """ShapeProp that makes some modules' outputs on fake tensors from their sizes
    (``fake_rules``: recurrent layers, batch norms) instead of running their decompositions,
    and with ``new_only`` the values of annotated nodes from their metadata."""

    def __init__(self, gm: torch.fx.GraphModule, new_only: bool = False) -> None:
        super().__init__(gm)
        self._new_only = new_only
        self._device: Any = None

    def run_node(self, n: torch.fx.Node) -> Any:
        meta = tensor_meta(n)
        if self._new_only and meta is not None and n.op not in ("placeholder", "output"):
            return _Annotated(meta)  # made into a tensor only if a node that runs reads it
        if self._new_only and n.op != "output":
            for inp in n.all_input_nodes:
                value = self.env.get(inp)
                if isinstance(value, _Annotated):
                    self.env[inp] = value.tensor(self._device)
        out = super().run_node(n)
        if n.op == "placeholder" and self._device is None and isinstance(out, torch.Tensor):
            self._device = out.device
        return out

    def call_module(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        out = None if kwargs else fake_module_output(self.fetch_attr(str(target)), tuple(args))
        return out if out is not None else super().call_module(target, args, kwargs)


class _Annotated:
    """A node's value known by its metadata alone (``propagate_shapes(new_only=True)``)."""

    def __init__(self, meta: Any) -> None:
        self.meta = meta

    def tensor(self, device: Any) -> torch.Tensor:
        return torch.empty_strided(tuple(self.meta.shape), tuple(self.meta.stride), dtype=self.meta.dtype,
                                   device=device)
