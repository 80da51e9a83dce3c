"""What a kernel group must store: the members read outside it, minus those read only
for their shape when a tensor outside the group provably has that shape.

Queries over a built ``Plan`` (graph.py builds it); used by every kernel generator and
by codegen.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..frontend.fx_meta import shape_of
from ..frontend.ops import POINTWISE
from .lower_reduction import FULL_OUTPUT
from .plan import Group, Plan, node_inputs


def group_outputs(plan: Plan, group: Group) -> list[torch.fx.Node]:
    """Members whose values are needed outside the group (or returned). A member read
    outside only for its shape (``t.size(0)``, ``t.shape``, ...) is not stored when a
    tensor outside the group provably has the same shape (see ``metadata_aliases``),
    unless that would leave the kernel without outputs."""
    outs = [m for m in group.members if _read_outside(plan, group, m)]
    kept = [m for m in outs if _shape_alias(plan, group, m) is None]
    return kept or outs


def _read_outside(plan: Plan, group: Group, m: torch.fx.Node) -> list[torch.fx.Node]:
    """Readers of m outside its group. Nodes replaced by an override (the tuple of
    ``torch.min(x, dim)``, the flips around a reverse scan) are never emitted: the
    override reads m through its op's arguments instead."""
    out = [u for u in m.users if plan.group_of.get(u) is not group and u not in plan.skipped]
    if any(u in plan.skipped for u in m.users):
        out += [n for g in plan.groups if g is not group for n, op in g.ops.items()
                if any(v is m for v in op.args.values())]
    return out


def is_dead(plan: Plan, group: Group) -> bool:
    """No value of the group is needed outside it (at most shapes that inputs have too):
    the kernel is not generated nor launched."""
    return all(_shape_alias(plan, group, m) is not None for m in group.members if _read_outside(plan, group, m))


def metadata_aliases(plan: Plan) -> dict[torch.fx.Node, torch.fx.Node]:
    """Group members that are not stored (only their shape is read outside the group)
    -> the node whose shape the forward reads instead."""
    aliases: dict[torch.fx.Node, torch.fx.Node] = {}
    for g in plan.groups:
        stored = set() if is_dead(plan, g) else set(group_outputs(plan, g))
        for m in g.members:
            if m not in stored and _read_outside(plan, g, m):
                alias = _shape_alias(plan, g, m)
                assert alias is not None
                aliases[m] = alias
    return aliases


# metadata reads that depend on the shape only
_META_METHODS = {"size", "dim", "numel", "ndimension"}
_META_ATTRS = {"shape", "ndim"}


def _metadata_use(plan: Plan, user: torch.fx.Node, node: torch.fx.Node) -> bool:
    if user not in plan.glue or not user.args or user.args[0] is not node:
        return False
    rest = list(user.args[1:]) + list(user.kwargs.values())
    if any(isinstance(a, torch.fx.Node) and a is node for a in rest):
        return False
    if user.op == "call_method":
        return str(user.target) in _META_METHODS
    return user.op == "call_function" and user.target is getattr and rest[:1] in (["shape"], ["ndim"])


def _shape_alias(plan: Plan, group: Group, node: torch.fx.Node) -> torch.fx.Node | None:
    """For a member whose every outside use is a metadata read: a node outside the group
    with the same shape for any input shapes (found through shape-preserving members:
    softmax, layer_norm, scans, pointwise ops of a single tensor operand), else None."""
    outside = _read_outside(plan, group, node)
    if not outside or not all(_metadata_use(plan, u, node) for u in outside):
        return None
    cur: Any = node
    while isinstance(cur, torch.fx.Node) and plan.group_of.get(cur) is group:
        op = group.ops[cur]
        if op.op in FULL_OUTPUT:
            cur = op.args.get("input")
            continue
        tensors = [v for v in node_inputs(op) if isinstance(v, str) or (isinstance(v, torch.fx.Node)
                                                                        and shape_of(v) is not None)]
        if op.op not in POINTWISE or len(tensors) != 1:
            return None
        cur = tensors[0]
    if not isinstance(cur, torch.fx.Node) or cur in plan.skipped or shape_of(cur) != shape_of(node):
        return None
    return cur
