"""The ``impl.<node>`` knob: a conv / matmul node as a Triton kernel (default) or as a
library call (cuDNN / cuBLAS through torch) whose neighbours stay in Triton.

With ``library`` the node is planned like any op the synthesizer cannot lower (a
``plan.fallback`` node, listed in ``Proposal.fallback_nodes``), so the pointwise ops
after it (bias, activation, scaling, residual, ...) no longer form its epilogue: they
become one pointwise kernel of their own that reads the library call's output.

The knob is keyed by the node's name, not its group key: choosing ``library`` removes
the group, which renumbers every later one. It is only offered when a node next to the
conv / matmul (a consumer, or a producer, through views) is itself lowered and is not
another conv / matmul: a candidate must launch at least one of its own Triton kernels,
so a bare convolution or GEMM keeps its Triton kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ..frontend.ops import NormOp
from ..plan.plan import Plan
from .conv.kernel_conv import conv_op
from .convnd.kernel_convnd import convnd_op
from .matmul.kernel_matmul import matmul_info

IMPL_CHOICES = ("triton", "library")
# forward comment of a node whose library call the genome chose (see codegen)
LIBRARY_COMMENT = "  # library call (impl=library: chosen over its Triton kernel; neighbours stay in Triton)"


def impl_key(node: torch.fx.Node) -> str:
    return f"impl.{node.name}"


def library_chosen(node: torch.fx.Node, op: NormOp | None, gm: torch.fx.GraphModule,
                   pshape: Callable[[str], tuple[int, ...]], genome: dict[str, str],
                   impl_knobs: dict[str, str]) -> bool:
    """Whether a node that would be lowered as a conv group (``op`` is None: conv_op is
    tried on unnormalised nodes) or a matmul group is a library call under ``genome``.
    Records the node's knob in ``impl_knobs`` (genome key -> node name) either way."""
    try:
        if op is None:
            candidate = conv_op(node, gm) is not None or convnd_op(node, gm, pshape) is not None
        else:
            candidate = matmul_info(node, op, pshape) is not None
    except (LoweringError, TypeError, ValueError, AttributeError, IndexError, KeyError):
        return False  # graph._safe treats the same failures as "not lowerable"
    if not candidate:
        return False
    key = impl_key(node)
    impl_knobs[key] = node.name
    return genome.get(key, IMPL_CHOICES[0]) == "library"


def library_offered(plan: Plan, anchor: str) -> bool:
    """A lowered node that is not itself a conv / matmul is next to ``anchor``: with the
    anchor as a library call, that node's kernel still runs."""
    node = next((n for n in plan.nodes if n.name == anchor), None)
    if node is None:
        return False
    anchors = set(plan.impl_knobs.values())
    return any(n in plan.group_of and n.name not in anchors for n in _neighbours(plan, node))


def _neighbours(plan: Plan, node: torch.fx.Node) -> list[torch.fx.Node]:
    """Consumers and producers of node, looking through glue (views, reshapes)."""
    out: list[torch.fx.Node] = []
    for step in (lambda n: list(n.users), lambda n: list(n.all_input_nodes)):
        todo: list[Any] = step(node)
        seen: set[torch.fx.Node] = set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in plan.glue:
                todo += step(n)
            else:
                out.append(n)
    return out
