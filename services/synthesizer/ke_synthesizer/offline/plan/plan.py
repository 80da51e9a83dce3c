"""The partitioner's data model: kernel groups and the plan of one captured graph.

Every family module reads and writes these types; the partitioner (graph.py) builds
them. This module imports no family, so every import points one way: families ->
plan, graph -> families.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ..frontend.captured import CapturedSpec
from ..frontend.ops import NormOp

# Arguments of canonical ops that carry data (tensors or scalars), as opposed to options.
OPERAND_ARGS = ("condition", "input", "mask", "other", "exponent", "min", "max", "value", "fill_value", "weight",
                "bias", "mat1", "mat2",
                # the long tail's pointwise math (lerp, addcmul / addcdiv, heaviside)
                "end", "tensor1", "tensor2", "values")


class GroupFailure(LoweringError):
    """A kernel group could not be generated: its members become library calls."""

    def __init__(self, group: str, members: set[str], reason: str) -> None:
        super().__init__(reason)
        self.group = group
        self.members = members


@dataclass
class Group:
    """One generated kernel: its member nodes in order and their canonical ops."""

    gid: int
    kind: str
    members: list[torch.fx.Node]
    ops: dict[torch.fx.Node, NormOp]
    shape: tuple[int, ...]
    sealed: bool = False
    # kind-specific data (reduction dim, matmul node, ...)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"g{self.gid}"


@dataclass
class Plan:
    spec: CapturedSpec
    nodes: list[torch.fx.Node]
    groups: list[Group]
    group_of: dict[torch.fx.Node, Group]
    fallback: list[torch.fx.Node]
    glue: set[torch.fx.Node]
    # nodes with no code of their own (a max/min tuple split into amax + argmax)
    skipped: set[torch.fx.Node] = field(default_factory=set)
    # override nodes that must be planned again as plain nodes (see build_plan)
    replan: set[str] = field(default_factory=set)
    # fusion boundaries that can be toggled: genome key (epilogue.<node> / prologue.<node>) -> node
    fusion_knobs: dict[str, str] = field(default_factory=dict)
    # conv / matmul nodes with an ``impl`` knob: genome key (impl.<node>) -> node (library_impl.py)
    impl_knobs: dict[str, str] = field(default_factory=dict)
    # the same keys -> the node's family (conv / matmul), and the seed policy's choice per key
    impl_families: dict[str, str] = field(default_factory=dict)
    impl_defaults: dict[str, str] = field(default_factory=dict)


def node_inputs(op: NormOp) -> list[Any]:
    """Operands of a canonical op in argument order (nodes, params, scalars)."""
    return [v for k, v in op.args.items() if k in OPERAND_ARGS and v is not None]


@dataclass(frozen=True)
class PlanContext:
    """What a family's recogniser may consult besides the node itself."""

    spec: CapturedSpec
    gm: torch.fx.GraphModule
    # shape of a parameter by dotted path (``"@path"`` operands of canonical ops)
    param_shape: Callable[[str], tuple[int, ...]]
    # the request's precision contract (ProposalRequest.precision: default / strict / tf32):
    # which tl.dot precisions a group may take (emit.precision.dot_precisions)
    precision: str = "default"
