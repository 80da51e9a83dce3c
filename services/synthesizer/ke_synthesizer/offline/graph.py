"""Partitioning: classify every fx node and group lowerable nodes into kernels.

A kernel group is launched at the position of its last member, so a group is *sealed*
as soon as a node outside it consumes one of its values: later nodes may no longer
join it (otherwise that consumer would run before the value exists).

A node starts a group of the first family (in ``families.FAMILIES`` order) that recognises it;
the fusion rules below grow the two families no recogniser starts alone: pointwise
chains and row reductions (with their prologues and epilogues), and attach pointwise
epilogues to families that declare ``epilogue``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from .emit.lower_pointwise import PointwiseEmitter
from .emit.precision import DEFAULT_CONTRACT
from .families import FAMILIES
from .families.family import KernelFamily
from .families.impl_policy import ImplPolicy
from .families.library_impl import ImplChoices
from .families.pointwise.kernel_pointwise import PointwiseFamily
from .families.row.kernel_row import RowFamily, is_column_reduction
from .frontend.captured import CapturedSpec
from .frontend.fx_meta import FLOAT_DTYPES, dtype_of, is_tensor_node, shape_of, tensor_meta
from .frontend.ops import POINTWISE, NormOp, device_move, normalize
from .frontend.overrides import (
    attention_overrides,
    cummax_overrides,
    max_dim_overrides,
    scan_overrides,
    triangular_overrides,
)
from .plan.lower_reduction import SCANS, RowInfo, row_info
from .plan.plan import Group, Plan, PlanContext, node_inputs

log = logging.getLogger(__name__)

# the two families the fusion rules below grow (no recogniser starts their groups)
POINTWISE_KIND = PointwiseFamily.kind
ROW_KIND = RowFamily.kind

# Ops that only move or reinterpret data (or compute shapes): emitted as plain Python
# in the candidate's forward, never counted as fallbacks.
GLUE_METHODS = {
    "view", "reshape", "permute", "transpose", "flatten", "unsqueeze", "squeeze", "contiguous",
    "expand", "expand_as", "size", "dim", "t", "narrow", "chunk", "split", "unbind", "movedim",
    "view_as", "reshape_as", "unflatten", "numel", "detach", "clone", "__getitem__",
}
GLUE_FUNCTIONS = {
    "getattr", "getitem", "flatten", "reshape", "permute", "transpose", "unsqueeze", "squeeze",
    "chunk", "split", "unbind", "movedim", "t", "narrow",
}
COMPARISONS = {"gt", "lt", "ge", "le", "eq", "ne"}


def _fx_name(node: torch.fx.Node) -> str:
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return str(node.target)


def is_glue(node: torch.fx.Node, gm: torch.fx.GraphModule | None = None) -> bool:
    if node.op == "call_module" and gm is not None:
        # reshaping modules are views: plain calls in the forward, not fallbacks
        return isinstance(gm.get_submodule(str(node.target)), (torch.nn.Flatten, torch.nn.Unflatten))
    if node.op == "call_method":
        return str(node.target) in GLUE_METHODS or (str(node.target) == "to" and device_move(node))
    if node.op == "call_function":
        name = _fx_name(node)
        if name in GLUE_FUNCTIONS:
            return True
        # integer/shape arithmetic (x.size(0) * 2, ...) has no tensor output
        return tensor_meta(node) is None and all(not is_tensor_node(a) for a in node.all_input_nodes)
    return node.op == "get_attr"


def _pointwise_ok(node: torch.fx.Node, op: NormOp, emitter: PointwiseEmitter) -> bool:
    if op.op not in POINTWISE:
        return False
    meta = tensor_meta(node)
    if meta is None or meta.dtype not in FLOAT_DTYPES + (torch.bool,):
        return False
    for v in node_inputs(op):
        if isinstance(v, torch.fx.Node):
            if tensor_meta(v) is None and not isinstance(v.meta.get("val", 0), (int, float)):
                pass  # symbolic scalars are passed as runtime arguments
            d = dtype_of(v)
            if d is not None and d not in FLOAT_DTYPES + (torch.bool,) and op.op not in COMPARISONS \
                    and op.op != "identity":  # an identity of an integer: a conversion to fp32 (ops.py)
                return False  # integer arithmetic keeps torch's integer semantics: library
        elif isinstance(v, str) and not v.startswith("@"):
            return False
    if op.inplace:
        target = op.args.get("input")
        if isinstance(target, torch.fx.Node) and len(target.users) > 1:
            return False  # others observe the mutation: keep the library semantics
    return emitter.emit(op, lambda _v: "v") is not None


def _param_shape_fn(spec: CapturedSpec) -> Callable[[str], tuple[int, ...]]:
    def shape(path: str) -> tuple[int, ...]:
        obj: Any = spec.model
        for part in path.split("."):
            obj = getattr(obj, part)
        return tuple(obj.shape)

    return shape


def build_plan(spec: CapturedSpec, genome: dict[str, str], forced_fallback: set[str] | None = None,
               families: Sequence[KernelFamily] = FAMILIES, policy: ImplPolicy | None = None,
               device: str = "", precision: str = DEFAULT_CONTRACT) -> Plan:
    """Classify nodes and greedily fuse lowerable nodes into kernel groups.

    ``genome['fusion']``: 'greedy' (default) joins a node to a producer's group when
    the shapes line up (pointwise chains; pointwise prologues/epilogues around
    reductions); 'none' gives every lowerable node its own kernel. ``policy`` gives the
    default ``impl`` of each conv / matmul on ``device`` (None: every one in Triton).
    """
    gm = spec.gm
    nodes = list(gm.graph.nodes)
    forced = forced_fallback or set()
    emitter = PointwiseEmitter()
    pshape = _param_shape_fn(spec)
    ctx = PlanContext(spec, gm, pshape, precision)
    by_kind = {f.kind: f for f in families}
    hidden_by: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    overrides = {**max_dim_overrides(nodes, gm, hidden_by), **cummax_overrides(nodes, gm, hidden_by),
                 **scan_overrides(nodes, gm, hidden_by),
                 **triangular_overrides(nodes, gm, hidden_by)}
    if genome.get("attention", "flash") == "flash":  # masked attention chains as one flash kernel
        taken = set(overrides) | {h for hs in hidden_by.values() for h in hs}
        hidden_attn: dict[torch.fx.Node, list[torch.fx.Node]] = {}
        for n, o in attention_overrides(nodes, gm, hidden_attn).items():
            if n not in taken and not taken.intersection(hidden_attn[n]):
                overrides[n], hidden_by[n] = o, hidden_attn[n]
    for n in [n for n in overrides if n.name in forced]:
        overrides.pop(n)
        hidden_by.pop(n, None)
    hidden = {h for hs in hidden_by.values() for h in hs}
    # an override inside another's pattern (the cummax values of a reverse cummax) is hidden by it
    overrides = {n: o for n, o in overrides.items() if n not in hidden}
    groups: list[Group] = []
    group_of: dict[torch.fx.Node, Group] = {}
    fallback: list[torch.fx.Node] = []
    glue: set[torch.fx.Node] = set()
    fuse = genome.get("fusion", "greedy") != "none"
    order = {n: i for i, n in enumerate(nodes)}
    # per-boundary fusion choices met while planning: genome key -> anchor node name
    fusion_knobs: dict[str, str] = {}
    impl = ImplChoices(policy.for_graph(gm, pshape, device) if policy is not None else {})

    def inputs_of(node: torch.fx.Node, op: NormOp | None) -> list[torch.fx.Node]:
        """What a node reads; an override (amin of a min tuple, a reverse scan) reads its
        op's operands, not the hidden nodes it replaces."""
        if node in overrides and op is not None:
            return [v for v in op.args.values() if isinstance(v, torch.fx.Node)]
        return node.all_input_nodes

    def seal_consumed(node: torch.fx.Node, joined: Group | None, op: NormOp | None = None) -> None:
        for inp in inputs_of(node, op):
            g = group_of.get(inp)
            if g is not None and g is not joined:
                g.sealed = True

    def add(node: torch.fx.Node, op: NormOp, g: Group | None, kind: str, shape: tuple[int, ...],
            info: dict[str, Any] | None = None) -> None:
        seal_consumed(node, g, op)
        if g is None:
            g = Group(len(groups), kind, [], {}, shape, info=dict(info or {}))
            groups.append(g)
        g.members.append(node)
        g.ops[node] = op
        group_of[node] = g

    def producer_groups(node: torch.fx.Node, op: NormOp | None = None) -> list[Group]:
        seen: list[Group] = []
        for inp in reversed(inputs_of(node, op)):
            g = group_of.get(inp)
            if g is not None and not g.sealed and g not in seen:
                seen.append(g)
        return seen if fuse else []

    for node in nodes:
        if node.op in ("placeholder", "output"):
            seal_consumed(node, None)
            continue
        if node in overrides:
            op: NormOp | None = overrides[node]
        elif node.op in ("call_function", "call_method", "call_module"):
            op = normalize(node, gm)
        else:
            op = None
        if node in hidden:
            continue  # materialised through the op that replaces it (see overrides)
        # a conv / matmul the genome sends to the library is planned as a fallback node
        lowerable = node.name not in forced and not impl.chosen(node, op, gm, pshape, genome)
        if op is None and lowerable:
            found = _recognise(families, node, op, ctx)
            if found is not None:
                fam, op, info = found
                add(node, op, None, fam.kind, shape_of(node) or (), info)
                continue
        if op is not None and lowerable:
            if _pointwise_ok(node, op, emitter):
                shape = shape_of(node) or ()
                target = None
                for g in producer_groups(node, op):
                    if g.kind == POINTWISE_KIND and g.shape == shape:
                        target = g
                        break
                    if by_kind[g.kind].epilogue and g.shape == shape:
                        key = f"epilogue.{g.members[0].name}"
                        fusion_knobs[key] = g.members[0].name
                        if genome.get(key, "fused") == "fused":
                            target = g
                            break
                        continue
                    if g.kind == ROW_KIND and _fits_row(node, op, g, group_of):
                        target = g
                        break
                if target is not None:
                    # other open pointwise producers of the same shape merge in too, so a
                    # value (e.g. a comparison mask) never has to round-trip memory
                    for p in producer_groups(node, op):
                        if p is target or p.kind != POINTWISE_KIND or p.shape != shape:
                            continue
                        if by_kind[target.kind].epilogue and \
                                genome.get(f"epilogue.{target.members[0].name}", "fused") != "fused":
                            continue
                        if target.kind != ROW_KIND or target.info["row"].layout_of(shape) is not None:
                            _merge(p, target, group_of, order, by_kind)
                if target is not None and target.kind == ROW_KIND:
                    target.info.setdefault("layouts", {})[node] = _row_layout(node, op, target, group_of)
                # open pointwise producers of a smaller shape (an expression of a bias or of a
                # per-row value) that only this node reads are recomputed in its kernel, read
                # through broadcast strides: one launch and no round trip through memory
                small = [] if target is not None and target.kind == ROW_KIND else \
                    [p for p in producer_groups(node, op) if p is not target and _absorbable(p, node, shape)]
                add(node, op, target, POINTWISE_KIND, shape)
                for p in small:
                    _merge(p, group_of[node], group_of, order, by_kind)
                continue
            found = _recognise(families, node, op, ctx)
            if found is not None:
                fam, op, info = found
                add(node, op, None, fam.kind, shape_of(node) or (), info)
                continue
            rinfo = _safe(row_info, node, op, pshape)
            total = _total_target(node, op, rinfo, group_of, fusion_knobs, genome) if fuse else None
            if total is not None:
                # the scalar sum / mean of the group's per-row values: each program adds its
                # block's share atomically; nothing may join after it (all programs must add first)
                add(node, op, total, ROW_KIND, ())
                total.info["layouts"][node] = "total"
                total.sealed = True
                continue
            if rinfo is not None:
                x = op.args["input"]
                target = None
                for g in producer_groups(node, op):
                    if group_of.get(x) is not g:  # type: ignore[call-overload]
                        continue
                    if g.kind == POINTWISE_KIND and g.shape == rinfo.full:
                        key = f"prologue.{node.name}"
                        fusion_knobs[key] = node.name
                        if genome.get(key, "fused") != "fused":
                            break
                        sib = _sibling_for(groups, rinfo, op, g, group_of, node, fusion_knobs, genome)
                        if sib is not None:
                            # another reduction over the same rows is open: the prologue and
                            # this reduction join its kernel (one pass, one launch)
                            _merge(g, sib, group_of, order, by_kind)
                            target = sib
                            break
                        # a pointwise prologue becomes part of the row kernel
                        g.kind = ROW_KIND
                        g.info["row"] = RowInfo(rinfo.full, rinfo.dims, "full")
                        g.info["layouts"] = {m: "full" for m in g.members}
                        target = g
                    elif g.kind == ROW_KIND and g.info["row"].full == rinfo.full and g.info["row"].dims == rinfo.dims \
                            and g.info["layouts"].get(x) == "full":
                        target = g
                    break
                if target is None and fuse and not (isinstance(x, torch.fx.Node) and x in group_of):
                    target = _sibling_row_group(groups, rinfo, x)
                if target is None and fuse and not (isinstance(x, torch.fx.Node) and x in group_of
                                                    and not group_of[x].sealed):
                    target = _sibling_for(groups, rinfo, op, None, group_of, node, fusion_knobs, genome)
                info = {"row": RowInfo(rinfo.full, rinfo.dims, "full"), "layouts": {}}
                add(node, op, target, ROW_KIND, rinfo.full, info)
                group_of[node].info["layouts"][node] = rinfo.layout
                if op.op in SCANS:  # a scan needs the whole row: no chunked strategy
                    group_of[node].info.setdefault("allowed", {})["strategy"] = ["single"]
                continue
        seal_consumed(node, None)
        if node.op in ("call_function", "call_method", "call_module", "get_attr") and is_glue(node, gm):
            glue.add(node)
        else:
            fallback.append(node)
            if _mutates(node, gm):
                # an in-place library call changes a tensor other kernels may still read:
                # no open kernel may extend past it
                for g in groups:
                    g.sealed = True
    # an override that was not lowered needs its hidden nodes: plan again without it
    replan = {n.name for n in overrides if n not in group_of}
    fallback.sort(key=nodes.index)
    groups = [g for g in groups if g.members]
    for i, g in enumerate(groups):
        g.gid = i
    skipped = {n for n in nodes if n.op != "output" and n not in group_of and n not in glue
               and n not in fallback and n.op != "placeholder"}
    return Plan(spec, nodes, groups, group_of, fallback, glue, skipped, replan, fusion_knobs, impl.knobs,
                impl.families, dict(impl.defaults))


def _absorbable(p: Group, node: torch.fx.Node, shape: tuple[int, ...]) -> bool:
    """Pointwise group p has a smaller shape that broadcasts to shape, and none of its
    values is read outside p except by node."""
    if p.kind != POINTWISE_KIND or not p.members or p.shape == shape or len(p.shape) > len(shape):
        return False
    pad = (1,) * (len(shape) - len(p.shape)) + tuple(p.shape)
    if any(a != 1 and a != b for a, b in zip(pad, shape, strict=True)):
        return False
    return all(u is node or u in p.ops for m in p.members for u in m.users)


def _merge(src: Group, dst: Group, group_of: dict[torch.fx.Node, Group], order: dict[torch.fx.Node, int],
           by_kind: Mapping[str, KernelFamily]) -> None:
    """Move every member of pointwise group src into dst (src is left empty)."""
    for m in src.members:
        group_of[m] = dst
        dst.ops[m] = src.ops[m]
        if dst.kind == ROW_KIND:
            dst.info["layouts"][m] = dst.info["row"].layout_of(src.shape)
    if by_kind[dst.kind].epilogue:  # the dot / window stays first; merged ops run in its epilogue
        dst.members = dst.members[:1] + sorted(dst.members[1:] + src.members, key=order.__getitem__)
    else:
        dst.members = sorted(dst.members + src.members, key=order.__getitem__)
    src.members = []
    src.ops = {}


def _sibling_row_group(groups: list[Group], rinfo: RowInfo, x: Any) -> Group | None:
    """An open row group over the same [M, N] view that already reads x: a second
    reduction of the same input (e.g. logsumexp and gather of logits) shares its loads."""
    for g in reversed(groups):
        if g.sealed or g.kind != ROW_KIND or not g.members:
            continue
        gi: RowInfo = g.info["row"]
        if gi.full != rinfo.full or gi.dims != rinfo.dims:
            continue
        if any(op.args.get("input") is x for op in g.ops.values()):
            return g
    return None


def _total_target(node: torch.fx.Node, op: NormOp, rinfo: RowInfo | None, group_of: dict[torch.fx.Node, Group],
                  fusion_knobs: dict[str, str], genome: dict[str, str]) -> Group | None:
    """The open row group whose per-row values ``node`` sums (or averages) to one fp32
    scalar (a loss's final mean after per-row terms: cosine, triplet), when genome key
    ``total.<node>`` is ``atomic`` (default): the scalar is then accumulated with one
    atomic add per row block in the same kernel instead of a second kernel launch
    (``separate``). Row-tile groups only, without scans (they never split)."""
    x = op.args.get("input")
    if rinfo is None or op.op not in ("sum", "mean") or not isinstance(x, torch.fx.Node) or shape_of(node) != ():
        return None
    g = group_of.get(x)
    if g is None or g.sealed or g.kind != ROW_KIND or g.info["layouts"].get(x) not in ("row", "rowflat"):
        return None
    if dtype_of(node) != torch.float32 or dtype_of(x) != torch.float32 or op.args.get("dtype") is not None:
        return None
    if len(rinfo.dims) != len(rinfo.full) or is_column_reduction(g) or any(o.op in SCANS for o in g.ops.values()):
        return None
    key = f"total.{node.name}"
    fusion_knobs[key] = node.name
    return g if genome.get(key, "atomic") == "atomic" else None


def _sibling_for(groups: list[Group], rinfo: RowInfo, op: NormOp, prologue: Group | None,
                 group_of: dict[torch.fx.Node, Group], node: torch.fx.Node, fusion_knobs: dict[str, str],
                 genome: dict[str, str]) -> Group | None:
    """An open row group over the same [M, N] view (same full shape, same reduced dims)
    that the reduction at ``node`` (with its pointwise ``prologue`` group, if any) may
    join: sibling reductions over the same rows (cosine similarity's dot, |a|^2, |b|^2; a
    loss's terms) then run in one kernel, one pass over the rows, one launch (launches in
    the seed candidate's forward, counted on CPU: F.cosine_similarity 3 -> 1,
    examples/ops/cosine_similarity_loss 4 -> 2, kl_div_rows 3 -> 2; MSE / Huber were
    already 1). Genome key
    ``sibling.<node>``: fused (default) or separate. Scans keep their own kernel (they
    force the single-pass strategy); the prologue must read nothing the sibling computes
    (it would then depend on a per-row value of that kernel)."""
    if op.op in SCANS:
        return None
    members = prologue.members if prologue is not None else []
    for g in reversed(groups):
        if g is prologue or g.sealed or g.kind != ROW_KIND or not g.members:
            continue
        gi: RowInfo = g.info["row"]
        if gi.full != rinfo.full or gi.dims != rinfo.dims or any(o.op in SCANS for o in g.ops.values()):
            continue
        if any(group_of.get(v) is g for m in members for v in m.all_input_nodes):
            return None
        key = f"sibling.{node.name}"
        fusion_knobs[key] = node.name
        return g if genome.get(key, "fused") == "fused" else None
    return None


def _mutates(node: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if node.op == "call_method":
        return str(node.target).endswith("_") and not str(node.target).startswith("__")
    if node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        return bool(node.kwargs.get("inplace")) or (name.endswith("_") and not name.startswith("__"))
    if node.op == "call_module":
        return bool(getattr(gm.get_submodule(str(node.target)), "inplace", False))
    return False


def _recognise(families: Sequence[KernelFamily], node: torch.fx.Node, op: NormOp | None,
               ctx: PlanContext) -> tuple[KernelFamily, NormOp, dict[str, Any]] | None:
    """The first family, in order, that starts a group at ``node``."""
    for fam in families:
        found = _safe(fam.recognise, node, op, ctx)
        if found is not None:
            return fam, found[0], found[1]
    return None


def _safe(analyse: Callable[..., Any], *args: Any) -> Any:
    """Analysis of an unusual call must not abort planning: it just stays a library call."""
    try:
        return analyse(*args)
    except (LoweringError, TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
        log.debug("%s failed for %s: %s", analyse.__name__, args[0], exc)
        return None


def _row_layout(node: torch.fx.Node, op: NormOp, g: Group, group_of: dict[torch.fx.Node, Group]) -> str | None:
    """The layout of pointwise ``node`` in row group ``g``: by its shape, except where the
    reduced dims are all of extent 1 at the captured shapes (the full and the keepdim shape
    are one): then a value computed from the group's per-row values alone is per row, as
    the reduction itself is (``row_info``). Read by its shape, a std over the one element
    of a (1,) example and the pointwise chain after it were "full": the kernel stored the
    value at every column, out of bounds at a 13-element input (fuzz case 10134)."""
    rinfo: RowInfo = g.info["row"]
    layout = rinfo.layout_of(shape_of(node))
    if layout != "full" or rinfo.keep_shape != rinfo.full:
        return layout
    tensors = [v for v in node_inputs(op) if isinstance(v, torch.fx.Node) and shape_of(v) is not None]
    if tensors and all(group_of.get(v) is g and g.info["layouts"].get(v) == "row" for v in tensors):
        return "row"
    return layout


def _fits_row(node: torch.fx.Node, op: NormOp, g: Group, group_of: dict[torch.fx.Node, Group]) -> bool:
    """Can a pointwise node join row group g? Its output must be full or one of the
    row shapes, and in-group operands must broadcast the way torch would: a full
    output may read row values only in their keepdim form."""
    rinfo: RowInfo = g.info["row"]
    layout = _row_layout(node, op, g, group_of)
    if layout is None:
        return False
    layouts = g.info["layouts"]
    for v in node_inputs(op):
        if isinstance(v, torch.fx.Node) and group_of.get(v) is g:
            lv = layouts.get(v)
            if layout == "full" and lv not in ("full", "row"):
                return False
            if layout != "full" and lv != layout:
                return False
        elif isinstance(v, torch.fx.Node) and shape_of(v) is not None and layout != "full":
            # external operand of a per-row value: must not carry reduced-dim extent
            pad = (1,) * (len(rinfo.full) - len(shape_of(v) or ())) + tuple(shape_of(v) or ())
            if layout == "row" and any(pad[d] != 1 for d in rinfo.dims):
                return False
    return True
