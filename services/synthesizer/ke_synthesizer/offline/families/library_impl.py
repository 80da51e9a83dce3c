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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ..frontend.ops import NormOp, normalize
from ..plan.plan import Plan
from .conv.kernel_conv import conv_op
from .convnd.kernel_convnd import convnd_op
from .matmul.kernel_matmul import matmul_info

IMPL_CHOICES = ("triton", "library")
# forward comment of a node whose library call the genome chose (see codegen)
LIBRARY_COMMENT = "  # library call (impl=library: chosen over its Triton kernel; neighbours stay in Triton)"


def impl_key(node: torch.fx.Node) -> str:
    return f"impl.{node.name}"


def heavy_family(node: torch.fx.Node, op: NormOp | None, gm: torch.fx.GraphModule,
                 pshape: Callable[[str], tuple[int, ...]]) -> str | None:
    """``conv`` or ``matmul`` when ``node`` would be lowered as a conv / matmul group (``op``
    is None: conv_op is tried on unnormalised nodes), else None."""
    try:
        if op is None:
            found = conv_op(node, gm) is not None or convnd_op(node, gm, pshape) is not None
            return "conv" if found else None
        return "matmul" if matmul_info(node, op, pshape) is not None else None
    except (LoweringError, TypeError, ValueError, AttributeError, IndexError, KeyError):
        return None  # graph._safe treats the same failures as "not lowerable"


@dataclass
class ImplChoices:
    """The ``impl`` knobs met while planning: genome key -> node name (``knobs``), -> its
    family (``families``), and the default choice of each key (``defaults``: the seed
    policy's, ``impl_policy.py``; a key it does not name defaults to ``triton``)."""

    defaults: Mapping[str, str] = field(default_factory=dict)
    knobs: dict[str, str] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)

    def default(self, key: str) -> str:
        return self.defaults.get(key, IMPL_CHOICES[0])

    def chosen(self, node: torch.fx.Node, op: NormOp | None, gm: torch.fx.GraphModule,
               pshape: Callable[[str], tuple[int, ...]], genome: dict[str, str]) -> bool:
        """Whether a node that would be lowered as a conv / matmul group is a library call
        under ``genome`` (else its default). Records the node's knob either way."""
        family = heavy_family(node, op, gm, pshape)
        if family is None:
            return False
        key = impl_key(node)
        self.knobs[key] = node.name
        self.families[key] = family
        return genome.get(key, self.default(key)) == "library"


def heavy_nodes(gm: torch.fx.GraphModule,
                pshape: Callable[[str], tuple[int, ...]]) -> dict[str, tuple[str, torch.fx.Node]]:
    """Every node of the graph the planner would lower as a conv / matmul group: genome key
    ``impl.<node>`` -> (family, node). The seed policy counts them (several convolutions
    make a whole model) before the plan exists."""
    out: dict[str, tuple[str, torch.fx.Node]] = {}
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        try:
            op = normalize(node, gm)
        except (LoweringError, TypeError, ValueError, AttributeError, IndexError, KeyError):
            continue
        family = heavy_family(node, op, gm, pshape)
        if family is not None:
            out[impl_key(node)] = (family, node)
    return out


def library_offered(plan: Plan) -> set[str]:
    """The ``impl`` anchors next to which a lowered node that is not itself a conv / matmul
    sits: with the anchor as a library call, that node's kernel still runs. All at once:
    asked anchor by anchor, the lookups were quadratic in the model's matmuls (6 s of a
    hand-written LSTM's lowering at 512 time steps, 1,024 matmuls)."""
    anchors = set(plan.impl_knobs.values())
    by_name = {n.name: n for n in plan.nodes if n.name in anchors}
    return {name for name, node in by_name.items()
            if any(n in plan.group_of and n.name not in anchors for n in _neighbours(plan, node))}


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
