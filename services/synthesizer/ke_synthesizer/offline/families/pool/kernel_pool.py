"""Pooling (max / avg, 1-D, 2-D and 3-D) as a direct Triton kernel: one lane per output
element walks its [KD x] [KH x] KW window (unrolled, sizes are compile-time constants),
and any following pointwise ops of the same shape run as an epilogue on the pooled value.
A 2-D pool inside a ``layout=channels_last_model`` conv chain (``emit/channels_last.py``)
walks its output NHWC, C innermost, and reads its input NHWC.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevolve.errors import LoweringError

from ...emit.channels_last import channels_last_groups
from ...emit.grid import program_id_lines, wide_offsets
from ...emit.launch_helpers import cached_plan_lines, tuple_source
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import (
    epilogue_broadcast_checks,
    epilogue_key_parts,
    epilogue_lines,
    epilogue_materialise_lines,
    epilogue_operands,
    epilogue_plan_lines,
    epilogue_value,
    kernel_name,
    load_cast,
    operand_shape,
)
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

_FUNCS = {F.max_pool1d: ("max", 1), F.max_pool2d: ("max", 2), F.max_pool3d: ("max", 3),
          F.avg_pool1d: ("avg", 1), F.avg_pool2d: ("avg", 2), F.avg_pool3d: ("avg", 3),
          # torch.max_pool*d are the ATen ops behind F.max_pool*d's indices switch (no indices)
          torch.max_pool1d: ("max", 1), torch.max_pool2d: ("max", 2), torch.max_pool3d: ("max", 3),
          # what F.max_pool*d(..., return_indices=True) traces to: (values, int64 indices)
          F.max_pool1d_with_indices: ("max", 1), F.max_pool2d_with_indices: ("max", 2),
          F.max_pool3d_with_indices: ("max", 3)}
_WITH_INDICES = {F.max_pool1d_with_indices, F.max_pool2d_with_indices, F.max_pool3d_with_indices,
                 F.adaptive_max_pool1d_with_indices, F.adaptive_max_pool2d_with_indices,
                 F.adaptive_max_pool3d_with_indices}
_MODULES = {nn.MaxPool1d: ("max", 1), nn.MaxPool2d: ("max", 2), nn.MaxPool3d: ("max", 3),
            nn.AvgPool1d: ("avg", 1), nn.AvgPool2d: ("avg", 2), nn.AvgPool3d: ("avg", 3)}
# adaptive pools: windows [floor(o * in / out), ceil((o + 1) * in / out)) of varying size
_ADAPTIVE_FUNCS = {F.adaptive_max_pool1d: ("max", 1), F.adaptive_max_pool2d: ("max", 2),
                   F.adaptive_max_pool3d: ("max", 3), F.adaptive_avg_pool1d: ("avg", 1),
                   F.adaptive_max_pool1d_with_indices: ("max", 1), F.adaptive_max_pool2d_with_indices: ("max", 2),
                   F.adaptive_max_pool3d_with_indices: ("max", 3),
                   F.adaptive_avg_pool2d: ("avg", 2), F.adaptive_avg_pool3d: ("avg", 3)}
_ADAPTIVE_MODULES = {nn.AdaptiveMaxPool1d: ("max", 1), nn.AdaptiveMaxPool2d: ("max", 2),
                     nn.AdaptiveMaxPool3d: ("max", 3), nn.AdaptiveAvgPool1d: ("avg", 1),
                     nn.AdaptiveAvgPool2d: ("avg", 2), nn.AdaptiveAvgPool3d: ("avg", 3)}
# spatial dims, outermost first: input sizes, output sizes, output / window / input coordinates
_DIMS = ("D", "H", "W")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_ARGS = {
    "max": ["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"],
    "avg": ["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"],
}


def _pair(v: Any, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def _adaptive_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    if node.op == "call_function" and node.target in _ADAPTIVE_FUNCS:
        kind, nd = _ADAPTIVE_FUNCS[node.target]  # type: ignore[index]
        args: dict[str, Any] = dict(zip(["input", "output_size", "return_indices"], node.args, strict=False))
        args.update(node.kwargs)
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _ADAPTIVE_MODULES:
        mod: Any = gm.get_submodule(str(node.target))
        kind, nd = _ADAPTIVE_MODULES[type(mod)]
        args = {"input": node.args[0], "output_size": mod.output_size,
                "return_indices": getattr(mod, "return_indices", False)}
    else:
        return None
    x, size = args.get("input"), args.get("output_size")
    shape = shape_of(x)
    indices = node.target in _WITH_INDICES or bool(args.get("return_indices"))
    if shape is None or len(shape) not in (nd + 1, nd + 2) or dtype_of(x) not in _FLOATS:
        return None
    out = (size,) * nd if isinstance(size, int) or size is None else tuple(size)
    if len(out) != nd or not all(o is None or (isinstance(o, int) and o > 0) for o in out):
        return None
    # None keeps the input's size; window bounds are computed per output element at run time
    return NormOp("pool", {"input": x}, extra={"kind": kind, "nd": nd, "adaptive": out, "indices": indices})


def pool_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    """A pooling node as NormOp('pool', ...) with static window parameters, or None."""
    if node.op == "call_function" and node.target in _FUNCS:
        kind, nd = _FUNCS[node.target]  # type: ignore[index]
        names = _ARGS[kind]
        args = dict(zip(names, node.args, strict=False))
        args.update(node.kwargs)
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _MODULES:
        mod = gm.get_submodule(str(node.target))
        kind, nd = _MODULES[type(mod)]
        args = {n: getattr(mod, n) for n in _ARGS[kind][1:] if hasattr(mod, n)}
        args["input"] = node.args[0]
    else:
        return _adaptive_op(node, gm)
    x = args.get("input")
    shape = shape_of(x)
    if shape is None or len(shape) not in (nd + 1, nd + 2) or dtype_of(x) not in _FLOATS:
        return None
    k = _pair(args.get("kernel_size"), nd)
    s = _pair(args.get("stride") or args.get("kernel_size"), nd)
    p = _pair(args.get("padding", 0), nd)
    d = _pair(args.get("dilation", 1), nd) if kind == "max" else (1,) * nd
    div = args.get("divisor_override") if kind == "avg" else None
    if k is None or s is None or p is None or d is None:
        return None
    indices = node.op == "call_function" and node.target in _WITH_INDICES or bool(args.get("return_indices", False))
    if div is not None and not (isinstance(div, int) and div != 0):
        return None
    return NormOp("pool", {"input": x}, extra={"kind": kind, "nd": nd, "k": k, "s": s, "p": p, "d": d,
                                               "ceil": bool(args.get("ceil_mode", False)), "div": div,
                                               "count_include_pad": bool(args.get("count_include_pad", True)),
                                               "indices": indices})


def gen_pool(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    pool = group.members[0]
    e = group.ops[pool].extra
    nd = e["nd"]
    adaptive = e.get("adaptive")
    # adaptive: window extents are constexprs (the launcher's largest window); else literals
    ks = [f"K{d}" for d in _DIMS[3 - nd:]] if adaptive else e["k"]
    ss, ps, ds = (e.get(k, (1,) * nd) if not adaptive else (1,) * nd for k in ("s", "p", "d"))
    dims = _DIMS[3 - nd:]  # input sizes D, H, W (innermost nd of them)
    lo = [d.lower() for d in dims]  # coordinate suffixes d, h, w
    ins = [f"i{c}_" if c == "d" else f"i{c}" for c in lo]  # input coordinates (id_: not the builtin)
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    block = int(PoolFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(PoolFamily.value(genome, group, "num_warps"))
    name = kernel_name(group, "pool")
    is_max = e["kind"] == "max"
    init = 'float("-inf")' if is_max else "0.0"

    val = epilogue_value(plan, group, ext, scalars)

    rank = len(group.shape)
    # inside a channels_last_model conv chain (emit/channels_last.py): lanes walk the output
    # NHWC, C innermost, and read the input NHWC
    nhwc = group.gid in channels_last_groups(plan, genome)
    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    # return_indices: the node is the (values, indices) tuple; one pass stores both, the
    # index of each maximum flat within its input plane, as torch numbers them
    indices = bool(e.get("indices"))
    if indices and (nhwc or len(group.members) > 1 or not is_max):
        raise LoweringError("pool: indices of a fused or channels-last pool")
    sig = ["x_ptr"] + [f"e{i}_ptr" for i in range(len(ext))] + [f"out{j}_ptr" for j in range(len(outs))]
    sig += ["idx_ptr"] if indices else []
    sig += ["n_out", *dims, *(f"O{d}" for d in dims)] + (["C"] if nhwc else [])
    sig += [f"d{k}" for k in range(1, rank - nd) if bcast]  # leading output dims (unravel)
    sig += [f"e{i}_s{k}" for i in bcast for k in range(rank)]
    sig += [f"s{i}" for i in range(len(scalars))]
    what = f"adaptive_{e['kind']}_pool{nd}d" if adaptive else f"{e['kind']}_pool{nd}d"
    fused = " -> ".join(what if m is pool else group.ops[m].op for m in group.members)
    x_ = "x".join
    consts = "".join(f"{k}: tl.constexpr, " for k in ks) if adaptive else ""
    window = ("its adaptive window [o * in // out, ceil((o + 1) * in / out)) (at most "
              f"{x_(ks)} taps)" if adaptive else
              f"one window of size {x_(map(str, ks))} (stride {x_(map(str, ss))}, padding {x_(map(str, ps))}"
              + (f", dilation {x_(map(str, ds))}" if any(v != 1 for v in ds) else "")
              + (", ceil_mode" if e.get("ceil") else "") + ")")
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", f"    {consts}BLOCK_SIZE: tl.constexpr,", "):",
             f"    # Fuses {fused}: each lane reduces {window}.",
             *program_id_lines(["pid"], wide=wide_offsets(group)),
             "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
             "    mask = offs < n_out"]
    # unravel offs (innermost first) into output coordinates and the (N, C) plane
    inner: list[str] = []
    if nhwc:  # offs = ((n * OH + oh) * OW + ow) * C + c
        lines += ["    # layout=channels_last_model: NHWC output and input, C innermost",
                  "    ch = offs % C", "    ow = (offs // C) % OW", "    oh = (offs // (C * OW)) % OH",
                  "    nb = offs // (C * OW * OH)", "    base = nb * (H * W * C) + ch"]
    for j in reversed(range(0 if nhwc else nd)):
        src = "offs" if not inner else f"(offs // {inner[0]})" if len(inner) == 1 else \
            f"(offs // ({' * '.join(inner)}))"
        lines.append(f"    o{lo[j]} = {src} % O{dims[j]}")
        inner.append(f"O{dims[j]}")
    if not nhwc:
        lines += [f"    plane = offs // {inner[0]}" if nd == 1 else f"    plane = offs // ({' * '.join(inner)})",
                  f"    base = plane * {' * '.join(dims)}"]
    addr = ins[0]
    for j in range(1, nd):
        addr = f"{addr} * {dims[j]} + {ins[j]}" if j == 1 else f"({addr}) * {dims[j]} + {ins[j]}"
    if nhwc:
        addr = f"({addr}) * C"
    inside = " & ".join(["mask"] + [f"({c} >= 0) & ({c} < {d})" for c, d in zip(ins, dims, strict=True)])
    if adaptive:
        inside += " & " + " & ".join(f"({c} < en_{c2})" for c, c2 in zip(ins, lo, strict=True))
        for c, dim in zip(lo, dims, strict=True):
            lines += [f"    st_{c} = (o{c} * {dim}) // O{dim}",
                      f"    en_{c} = ((o{c} + 1) * {dim} + O{dim} - 1) // O{dim}"]
    counted = not is_max and not adaptive and not e["count_include_pad"] and e["div"] is None
    lines += [f"    acc = tl.full([BLOCK_SIZE], {init}, tl.float32)"]
    if indices:
        lines.append("    best = tl.full([BLOCK_SIZE], -1, tl.int64)")
    if counted:
        lines.append("    count = tl.zeros([BLOCK_SIZE], dtype=tl.float32)")
    ind = "    "
    for j in range(nd):
        lines.append(f"{ind}for k{lo[j]} in tl.static_range({ks[j]}):")
        ind += "    "
    if adaptive:
        lines += [f"{ind}{ins[j]} = st_{lo[j]} + k{lo[j]}" for j in range(nd)]
    else:
        lines += [f"{ind}{ins[j]} = o{lo[j]} * {ss[j]} - {ps[j]} + k{lo[j]}" + (f" * {ds[j]}" if ds[j] != 1 else "")
                  for j in range(nd)]
    lines += [f"{ind}inside = {inside}",
              f"{ind}v = tl.load(x_ptr + base + {addr}, mask=inside, other={init})"
              f"{load_cast(dtype_of(group.ops[pool].args['input']))}",
              f"{ind}acc = {'tl.maximum(acc, v)' if is_max else 'acc + v'}"]
    if indices:
        # torch's rule: the first in-bounds tap, then a strictly larger value or any NaN
        plane_addr = ins[0]
        for j in range(1, nd):
            plane_addr = f"({plane_addr}) * {dims[j]} + {ins[j]}"
        lines[-1:] = [f"{ind}take = inside & ((v > acc) | (v != v) | (best < 0))",
                      f"{ind}acc = tl.where(take, v, acc)",
                      f"{ind}best = tl.where(take, ({plane_addr}).to(tl.int64), best)"]
    if counted:
        lines.append(f"{ind}count += tl.where(inside, 1.0, 0.0)")
    if is_max:
        lines.append(f"    v_{pool.name} = acc")
    elif adaptive:
        size = " * ".join(f"(en_{c} - st_{c})" for c in lo)
        lines.append(f"    v_{pool.name} = acc / ({size}).to(tl.float32)")
    elif e["div"] is not None:
        lines.append(f"    v_{pool.name} = acc / {float(e['div'])!r}  # divisor_override")
    elif e["count_include_pad"] and not e["ceil"]:
        # windows never leave the padded input (no ceil_mode): the divisor is the window size
        lines.append(f"    v_{pool.name} = acc / {float(math.prod(ks))!r}")
    elif e["count_include_pad"]:
        # ceil_mode: the last window may end past the padded input; it counts up to its end
        size = " * ".join(f"(tl.minimum(o{c} * {ss[j]} - {ps[j]} + {ks[j]}, {dims[j]} + {ps[j]}) - "
                          f"(o{c} * {ss[j]} - {ps[j]}))" for j, c in enumerate(lo))
        lines.append(f"    v_{pool.name} = acc / ({size}).to(tl.float32)")
    else:
        lines.append(f"    v_{pool.name} = acc / tl.maximum(count, 1.0)")
    # epilogue operands of the output's shape are read flat; broadcast ones (a per-channel
    # shift, ...) through the strides of their expanded view, the plane index unravelled
    lead = rank - nd
    if bcast and nhwc:
        lines += ["    i0 = nb", "    i1 = ch"]
    elif bcast:
        lines.append("    rem = plane")
        for k in reversed(range(lead)):
            lines += [f"    i{k} = rem % d{k}", f"    rem = rem // d{k}"] if k else ["    i0 = rem"]
    idx = [f"i{k}" for k in range(lead)] + [f"o{c}" for c in lo]
    lines += epilogue_lines(group, emitter, val, ext, full, idx, "offs", outs)
    if indices:
        lines.append("    tl.store(idx_ptr + offs, best, mask=mask)")
    kernel = "\n".join(lines) + "\n"

    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", ""]
    params = ["x"] + [f"e{i}" for i in range(len(ext))]
    ll.append(f"def _plan_{name}({', '.join(params)}):")
    ll.append("    w = x.shape[-1]" if nd == 1 else f"    {', '.join(lo)} = x.shape[-{nd}:]")
    if adaptive:
        ll += [f"    o{c} = {c}" if adaptive[j] is None else f"    o{c} = {adaptive[j]}" for j, c in enumerate(lo)]
        # the widest window: ceil(in / out) + 1 taps at most, never more than the input
        ll += [f"    k{c} = min({c}, ({c} + o{c} - 1) // o{c} + 1)" for c in lo]
    elif e["ceil"]:
        # torch's rule: round up, but the last window must start inside the input or left padding
        for j, c in enumerate(lo):
            ll += [f"    o{c} = ({c} + 2 * {ps[j]} - {ds[j]} * ({ks[j]} - 1) - 1 + {ss[j] - 1}) // {ss[j]} + 1",
                   f"    if (o{c} - 1) * {ss[j]} >= {c} + {ps[j]}:", f"        o{c} -= 1"]
    else:
        ll += [f"    o{c} = ({c} + 2 * {ps[j]} - {ds[j]} * ({ks[j]} - 1) - 1) // {ss[j]} + 1" for j, c in enumerate(lo)]
    ll.append(f"    shape = (*x.shape[:-{nd}], {', '.join(f'o{c}' for c in lo)})")
    ll += epilogue_broadcast_checks(name, len(ext))
    ll += ["    n = math.prod(shape)",
           f"    block = min({block}, _pow2(n))",
           "    grid = ((n + block - 1) // block,) if n > 0 else None",
           f"    tail = (n, {', '.join(lo)}, {', '.join(f'o{c}' for c in lo)}{', x.shape[1]' if nhwc else ''})"
           + (f" + shape[1:{rank - nd}]" if bcast else "")]
    ll += epilogue_plan_lines(full)
    ll += ["    consts = {" + ", ".join(f"'{k}': k{c}" for k, c in zip(ks, lo, strict=True)) + "}" if adaptive
           else "    consts = {}",
           "    return shape, materialise, grid, block, tail, consts", "", ""]
    key = tuple_source(["x.shape"] + epilogue_key_parts(full))
    ll.append(f"def launch_{name}({', '.join(params + [f's{i}' for i in range(len(scalars))])}):")
    ll += cached_plan_lines(f"_plans_{name}", key, f"_plan_{name}({', '.join(params)})",
                            "shape, materialise, grid, block, tail, consts")
    ll += ["    x = x.contiguous(memory_format=torch.channels_last)" if nhwc else "    x = x.contiguous()"]
    ll += epilogue_materialise_lines(full, channels_last=nhwc)
    call = ["x"] + [f"e{i}" for i in range(len(ext))]
    fmt = ", memory_format=torch.channels_last" if nhwc else ""
    for j, m in enumerate(outs):
        dt = dtype_of(group.ops[pool].args["input"]) if indices else dtype_of(m) or torch.float32
        ll.append(f"    out{j} = torch.empty(shape, device=x.device, dtype={dt}{fmt})")
        call.append(f"out{j}")
    if indices:
        ll.append("    idx = torch.empty(shape, device=x.device, dtype=torch.int64)")
        call.append("idx")
    call += ["*tail"] + [f"s{i}" for i in range(len(scalars))]
    ll += ["    if grid is not None:",
           f"        {name}[grid]({', '.join(call)}, BLOCK_SIZE=block, **consts, num_warps={warps})",
           f"    return {', '.join(f'out{j}' for j in range(len(outs)))}" + (", idx" if indices else "")]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


def pool_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    ext, scalars = epilogue_operands(plan, group)
    return [group.ops[group.members[0]].args["input"]] + ext + scalars, group_outputs(plan, group)


class PoolFamily(KernelFamily):
    """max / avg pooling (1-3 spatial dims) with a fused pointwise epilogue."""

    kind = "pool"
    epilogue = True
    # a max pool with return_indices is one (values, int64 indices) node; other pools
    # only take floating inputs (pool_op), so their outputs are floating too
    tuple_outputs = True
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        pool = pool_op(node, ctx.gm) if op is None else None
        return None if pool is None else (pool, {})

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_pool(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return pool_launch_args(plan, group)
