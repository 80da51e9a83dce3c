"""One memory layout for a chain of convolutions (``layout=channels_last_model`` of conv2d
groups): which groups write their outputs channels-last (NHWC storage of a logically NCHW
tensor, strides (H*W*C, 1, W*C, C)). Conv and pool kernels both read it, so it lives here
rather than in one family.

A conv2d group with the value, and a 2-D pool group whose input such a group writes, keep
their outputs NHWC when every reader takes that layout without a conversion; any other
reader (a batch-statistics row kernel, a separate pointwise kernel, a view, a library call)
gets NCHW, so a chain converts once where it starts and once where it ends rather than
once per convolution.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..frontend.fx_meta import tensor_meta
from ..plan.plan import Group, Plan
from ..plan.plan_outputs import group_outputs
from .operands import epilogue_operands, operand_shape

MODEL_LAYOUT = "channels_last_model"
# glue that reads only a tensor's metadata, the same in every memory format
_SHAPE_READS = {"size", "dim", "numel", "shape", "dtype", "device"}


def _layout(genome: dict[str, str], group: Group) -> str:
    return genome.get(f"{group.key}.layout", "contiguous")


def is_conv2d(group: Group) -> bool:
    return group.kind == "conv" and group.ops[group.members[0]].extra.get("nd") == 2


def is_pool2d(group: Group) -> bool:
    """A 2-D pool over a 4-D tensor: its lanes can walk NHWC as well as NCHW."""
    return group.kind == "pool" and group.ops[group.members[0]].extra.get("nd") == 2 and len(group.shape) == 4


def _input(group: Group) -> Any:
    return group.ops[group.members[0]].args.get("input")


def _full_epilogue_operands(plan: Plan, group: Group) -> list[Any]:
    ext, _ = epilogue_operands(plan, group)
    return [v for v in ext if operand_shape(plan, v) == group.shape]


def _shape_read(node: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return str(node.target) in _SHAPE_READS
    return node.op == "call_function" and node.target is getattr and str(node.args[1]) in _SHAPE_READS


def _reader_takes(plan: Plan, genome: dict[str, str], out: torch.fx.Node, reader: torch.fx.Node,
                  keep: set[int]) -> bool:
    """Whether ``reader`` of ``out`` takes it channels-last without a conversion: the input
    of a conv2d that reads NHWC (its launcher's conversion is then a no-op) or of a pool
    that stays in ``keep``, an epilogue operand of the output's shape of a group in
    ``keep`` (read at its own output's offsets), a metadata read, or the model's output
    (``codegen._render_output`` copies it back once when the reference returns a
    contiguous tensor)."""
    if reader.op == "output":
        meta = tensor_meta(out)
        return meta is not None and getattr(meta, "memory_format", None) in (torch.contiguous_format,
                                                                             torch.channels_last)
    if _shape_read(reader):
        return True
    g = plan.group_of.get(reader)
    if g is None or not (is_conv2d(g) or is_pool2d(g)):
        return False
    if reader is g.members[0] and _input(g) is out:
        return g.gid in keep or (is_conv2d(g) and _layout(genome, g) != "contiguous")
    return g.gid in keep and any(v is out for v in _full_epilogue_operands(plan, g))


def channels_last_groups(plan: Plan, genome: dict[str, str]) -> set[int]:
    """The groups (gids) that write their outputs channels-last: conv2d groups with
    ``layout=channels_last_model`` and 2-D pools whose input one of them writes, whose
    every reader takes the layout (``_reader_takes``). The largest such set: start from
    all, drop any with a reader that does not take it (or a pool whose producer was
    dropped), repeat."""
    producer = {m: g for g in plan.groups for m in g.members}
    keep = {g.gid for g in plan.groups if is_conv2d(g) and _layout(genome, g) == MODEL_LAYOUT}
    keep |= {g.gid for g in plan.groups if is_pool2d(g) and _input(g) in producer}
    changed = True
    while changed:
        changed = False
        for g in plan.groups:
            if g.gid not in keep:
                continue
            readers = [(m, u) for m in group_outputs(plan, g) for u in m.users if plan.group_of.get(u) is not g]
            fed = not is_pool2d(g) or producer[_input(g)].gid in keep
            if not fed or any(u in plan.skipped for _, u in readers) or \
                    not all(_reader_takes(plan, genome, m, u, keep) for m, u in readers):
                keep.discard(g.gid)
                changed = True
    return keep


def conv_chain_links(plan: Plan) -> bool:
    """Whether a conv2d group's output reaches another conv2d group (as its input or an
    epilogue operand of its output's shape), directly or through 2-D pools: the plans
    where ``channels_last_model`` can keep an activation channels-last between kernels."""
    for g in plan.groups:
        if not is_conv2d(g):
            continue
        todo = list(group_outputs(plan, g))
        while todo:
            m = todo.pop()
            for u in m.users:
                r = plan.group_of.get(u)
                if r is None or r is g:
                    continue
                if is_pool2d(r) and u is r.members[0] and _input(r) is m:
                    todo += group_outputs(plan, r)
                elif is_conv2d(r) and ((u is r.members[0] and _input(r) is m)
                                       or any(v is m for v in _full_epilogue_operands(plan, r))):
                    return True
    return False
