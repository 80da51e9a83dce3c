"""Data movement and indexing as Triton kernels (``index_ops.py`` recognises them).

**gather form** (flip, roll, cat, stack, tril / triu, repeat / tile, every pad mode,
index_select, gather, embedding, pixel (un)shuffle, repeat_interleave, bucketize /
searchsorted): one lane per output element unravels its flat offset into coordinates,
computes its source address by index arithmetic (``gather_body.py``) and loads it; same-
shape pointwise consumers run as a fused epilogue on the loaded value, so the moved
tensor is written once. Values keep their dtype (integer and boolean data exact);
sources are read through their strides, so views are never copied.

**bag form** (embedding_bag, segment_reduce): one program per segment (bag) and column
block walks the segment's entries, 16 rows a step, and reduces them in fp32 registers: no
atomics, a fixed summation order (deterministic run to run). Segment bounds come from
offsets (``include_last_offset`` or not), fixed-length bags of a 2-D input, or lengths
(each program sums the lengths before its segment in blocks of 1,024).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.coords import unravel_lines
from ...emit.grid import program_id_lines, wide_offsets
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import (
    epilogue_broadcast_checks,
    epilogue_lines,
    epilogue_materialise_lines,
    epilogue_operands,
    epilogue_plan_lines,
    epilogue_value,
    kernel_name,
    operand_shape,
)
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.lower_reduction import row_info
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised
from .gather_body import body
from .index_ops import index_op

TL = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
      torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
      torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1"}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# entries of a bag reduced per step: 16 gathered rows in flight per program instead of one
# (the scalar walk took over 600 s in the interpreter on the shrunk hashed-bag example)
_BLOCK_J = 16


def _rank(plan: Plan, v: Any) -> int:
    shape = operand_shape(plan, v)
    if shape is None:
        raise LoweringError(f"no shape for {v!r}")
    return len(shape)


def gen_gather(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
    anchor = group.members[0]
    e = group.ops[anchor].extra
    sources = e["sources"]
    out_shape = shape_of(anchor)
    out_dtype = dtype_of(anchor)
    if not out_shape or out_dtype not in TL:
        raise LoweringError("index: a 0-d or unknown-dtype output")
    post = e.get("post", "")
    # a copy reshaped afterwards (view_copy, ravel) walks the view's coordinates
    r = _rank(plan, sources[0]) if post else len(out_shape)
    b = body(e, r, [_rank(plan, s) for s in sources], out_dtype, TL[out_dtype])
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    if bcast and post:
        raise LoweringError("index: broadcast epilogue operands of a reshaped copy")
    block = int(IndexFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(IndexFamily.value(genome, group, "num_warps"))
    name = kernel_name(group, f"index_{e['kind']}")
    k = len(sources)
    sig = [f"x{i}_ptr" for i in range(k)] + [f"e{i}_ptr" for i in range(len(ext))]
    sig += [f"out{j}_ptr" for j in range(len(outs))] + ["n_out"] + [f"S{d}" for d in range(r)]
    sig += [n for n, _ in b.runtime]
    sig += [f"x{i}_s{j}" for i in range(k) for j in range(b.ranks[i])]
    sig += [f"e{i}_s{d}" for i in bcast for d in range(r)] + [f"s{i}" for i in range(len(scalars))]
    fused = " -> ".join(e["kind"] if m is anchor else group.ops[m].op for m in group.members)
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", "    BLOCK_SIZE: tl.constexpr,", "):",
             f"    # {fused}: each lane computes its source address from its output coordinates",
             *program_id_lines(["pid"], wide=wide_offsets(group)),
             "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
             "    mask = offs < n_out", *unravel_lines(r), *b.lines]
    epilogue = len(group.members) > 1
    cast = ".to(tl.float32)" if epilogue and out_dtype in _FLOATS else ""
    lines.append(f"    v_{anchor.name} = val{cast}")
    lines += epilogue_lines(group, emitter, epilogue_value(plan, group, ext, scalars), ext, full,
                            [f"o{d}" for d in range(r)], "offs", outs)
    kernel = "\n".join(lines) + "\n"

    params = [f"x{i}" for i in range(k)] + [f"e{i}" for i in range(len(ext))] + [f"s{i}" for i in range(len(scalars))]
    returned = ", ".join(f"out{j}" + (f".{post}" if post else "") for j in range(len(outs)))
    ll = [f"def launch_{name}({', '.join(params)}):"]
    ll += [f"    {ln}" for ln in b.prep + b.shape]
    ll += [f"    if len(shape) != {r}:", f"        raise RuntimeError('{name}: an output of rank {r} expected')"]
    ll += epilogue_broadcast_checks(name, len(ext))
    ll += ["    n = 1", "    for d in shape:", "        n *= d"]
    ll += [f"    out{j} = torch.empty(shape, device=x0.device, dtype={dtype_of(m)})" for j, m in enumerate(outs)]
    ll += ["    if n == 0:", f"        return {returned}"]
    ll += [f"    {n} = {expr}" for n, expr in b.runtime]
    ll += ["    tail = ()"] + epilogue_plan_lines(full) + epilogue_materialise_lines(full)
    call = ([f"x{i}" for i in range(k)] + [f"e{i}" for i in range(len(ext))] + [f"out{j}" for j in range(len(outs))]
            + ["n", "*shape"] + [n for n, _ in b.runtime] + [f"*x{i}.stride()" for i in range(k)]
            + ["*tail"] + [f"s{i}" for i in range(len(scalars))])
    ll += [f"    block = min({block}, _pow2(n))",
           f"    {name}[((n + block - 1) // block,)]({', '.join(call)}, BLOCK_SIZE=block, num_warps={warps})",
           f"    return {returned}"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


def gen_bag(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
    anchor = group.members[0]
    e = group.ops[anchor].extra
    out_dtype = dtype_of(anchor)
    if out_dtype not in _FLOATS:
        raise LoweringError("bag: a floating-point table only")
    mode = e["mode"]
    bag = e["kind"] == "embedding_bag"
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    if bcast and len(group.shape) != 2:
        raise LoweringError("bag: broadcast epilogue operands of a 2-D output only")
    block = min(int(IndexFamily.value(genome, group, "BLOCK_SIZE")), 256)
    warps = int(IndexFamily.value(genome, group, "num_warps"))
    name = kernel_name(group, f"index_{e['kind']}")
    pad = e.get("padding_idx") if bag else None
    weighted = bag and e["weighted"]
    # source names in the launcher: x0 the indices (bag) or the data, x1 the table or the segments
    if bag:
        src = ["idx", "table"] + ([] if e["fixed"] else ["offsets"]) + (["psw"] if weighted else [])
    else:
        src = ["data", "segs"]
    sig = [f"{s}_ptr" for s in src] + [f"e{i}_ptr" for i in range(len(ext))]
    sig += [f"out{j}_ptr" for j in range(len(outs))] + ["D", "N_IDX", "N_OFF", "L", "t_s0", "t_s1", "i_s0", "i_s1"]
    sig += [f"e{i}_s{d}" for i in bcast for d in range(2)] + [f"s{i}" for i in range(len(scalars))]
    table = "table" if bag else "data"
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", "    BLOCK_D: tl.constexpr,",
             "    BLOCK_J: tl.constexpr,", "):",
             f"    # {e['kind']} ({mode}): one program per segment and column block walks the segment's",
             "    # entries BLOCK_J at a time (a fixed order: deterministic, no atomics)",
             *program_id_lines(["b", "pc"], wide=wide_offsets(group)),
             "    cols = pc * BLOCK_D + tl.arange(0, BLOCK_D)",
             "    mask = cols < D"]
    seg = "offsets" if bag else "segs"
    if bag and e["fixed"]:
        lines += ["    start = b * L", "    end = start + L"]
    elif not bag and e["lengths"]:
        lines += ["    start = tl.sum(tl.zeros([1024], dtype=tl.int64), axis=0)",
                  "    for c in range(0, b, 1024):  # the lengths before this segment",
                  "        r = c + tl.arange(0, 1024)",
                  "        start += tl.sum(tl.load(segs_ptr + r, mask=r < b, other=0).to(tl.int64), axis=0)",
                  "    end = start + tl.load(segs_ptr + b).to(tl.int64)"]
    else:
        lines += [f"    start = tl.load({seg}_ptr + b).to(tl.int64)",
                  f"    end = tl.load({seg}_ptr + b + 1, mask=b + 1 < N_OFF, other=N_IDX).to(tl.int64)"]
    is_max = mode in ("max", "min")
    initial = e.get("initial")
    init = {"max": 'float("-inf")', "min": 'float("inf")'}.get(mode, "0.0") if initial is None else repr(initial)
    # BLOCK_J entries a step: their indices in one load, a [BLOCK_J, BLOCK_D] tile of rows
    lines += [f"    acc = tl.full([BLOCK_D], {init}, tl.float32)",
              "    cnt = tl.zeros([BLOCK_D], dtype=tl.float32)",
              "    for j0 in range(start, end, BLOCK_J):",
              "        jj = j0 + tl.arange(0, BLOCK_J)",
              "        jm = jj < end",
              ("        i = tl.load(idx_ptr + b * i_s0 + (jj - start) * i_s1, mask=jm, other=0).to(tl.int64)"
               if bag and e["fixed"] else "        i = tl.load(idx_ptr + jj * i_s1, mask=jm, other=0).to(tl.int64)"
               if bag else "        i = jj"),
              f"        keep = jm & (i != {int(pad)})" if pad is not None else "        keep = jm",
              f"        w = tl.load({table}_ptr + i[:, None] * t_s0 + cols[None, :] * t_s1,",
              "                    mask=keep[:, None] & mask[None, :], other=0).to(tl.float32)"]
    if weighted:
        lines.append("        w = w * tl.load(psw_ptr + jj, mask=jm, other=0).to(tl.float32)[:, None]")
    if is_max:
        red, fill = ("max", 'float("-inf")') if mode == "max" else ("min", 'float("inf")')
        lines.append(f"        acc = tl.{'maximum' if mode == 'max' else 'minimum'}"
                     f"(acc, tl.{red}(tl.where(keep[:, None], w, {fill}), axis=0))")
    else:
        lines.append("        acc += tl.sum(w, axis=0)")
    lines.append("        cnt += tl.sum(keep.to(tl.float32), axis=0)")
    if mode == "mean":
        # an empty bag is 0 (embedding_bag); an empty segment 0 / 0 = nan (segment_reduce)
        if bag:
            lines.append("    acc = acc / tl.maximum(cnt, 1.0)")
        else:  # (initial + sum) / count; an empty segment is the initial value
            lines.append("    acc = acc / cnt" if initial is None else
                         f"    acc = tl.where(cnt > 0, acc / cnt, {initial!r})")
    elif is_max and bag:
        lines.append("    acc = tl.where(cnt > 0, acc, 0.0)")
    lines.append(f"    v_{anchor.name} = acc")
    lines += epilogue_lines(group, emitter, epilogue_value(plan, group, ext, scalars), ext, full, ["b", "cols"],
                            "b * D + cols", outs)
    kernel = "\n".join(lines) + "\n"

    params = [f"x{i}" for i in range(len(src))] + [f"e{i}" for i in range(len(ext))]
    params += [f"s{i}" for i in range(len(scalars))]
    ll = [f"def launch_{name}({', '.join(params)}):"]
    if bag:
        # indices read through their strides (fixed bags: a [bags, L] view, read in place)
        ll += ["    d = x1.shape[1]", "    L = x0.shape[1] if x0.dim() == 2 else 0"]
        if e["fixed"]:
            ll += ["    nb, n_off = x0.shape[0], 0", "    i_s = x0.stride()", "    n_idx = x0.numel()"]
            ll += ["    x2 = x2.reshape(-1)  # the per-sample weights, flat as the entries"] if weighted else []
        else:
            last = 1 if e["include_last"] else 0
            ll += [f"    nb, n_off = x2.shape[0] - {last}, x2.shape[0]", "    i_s = (0, x0.stride(0))",
                   "    n_idx = x0.shape[0]"]
        ll += ["    shape = (nb, d)", "    t_s = x1.stride()"]
    else:
        ll += ["    rest = tuple(x0.shape[1:])", "    x0 = x0.reshape(x0.shape[0], -1)", "    d = x0.shape[1]",
               "    nb = x1.shape[0]" + ("" if e["lengths"] else " - 1"), "    n_off = x1.shape[0]",
               "    shape = (nb, *rest)", "    t_s = x0.stride()", "    L = 0",
               "    i_s = (0, 0)", "    n_idx = x0.shape[0]"]
    ll += epilogue_broadcast_checks(name, len(ext))
    ll += [f"    out{j} = torch.empty(shape, device=x0.device, dtype={dtype_of(m)})" for j, m in enumerate(outs)]
    ll += ["    if nb == 0 or d == 0:", f"        return {', '.join(f'out{j}' for j in range(len(outs)))}"]
    ll += ["    tail = ()"] + [ln.replace("(shape,", "((nb, d),") for ln in epilogue_plan_lines(full)]
    ll += [ln.replace("expand(shape)", "expand(shape).reshape(nb, d)") for ln in epilogue_materialise_lines(full)]
    call = ([f"x{i}" for i in range(len(src))] + [f"e{i}" for i in range(len(ext))]
            + [f"out{j}" for j in range(len(outs))]
            + ["d", "n_idx", "n_off", "L", "t_s[0]", "t_s[1]", "i_s[0]", "i_s[1], *tail"]
            + [f"s{i}" for i in range(len(scalars))])
    ll += [f"    block = min({block}, _pow2(d))",
           f"    {name}[(nb, (d + block - 1) // block)]({', '.join(call)}, BLOCK_D=block, BLOCK_J={_BLOCK_J}, "
           f"num_warps={warps})",
           f"    return {', '.join(f'out{j}' for j in range(len(outs)))}"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


class IndexFamily(KernelFamily):
    """Data movement, indexing, lookups and segment reductions (gather and bag forms)."""

    kind = "index"
    epilogue = True
    any_dtype_outputs = True
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is not None and op.op != "gather":
            return None
        if op is not None and row_info(node, op, ctx.param_shape) is not None:
            return None  # a per-row pick the row family fuses with its reductions
        found = index_op(node, ctx.gm)
        if found is None or found.extra["form"] == "scatter":
            return None
        return found, {}

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        form = group.ops[group.members[0]].extra["form"]
        return (gen_bag if form == "bag" else gen_gather)(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        ext, scalars = epilogue_operands(plan, group)
        return list(group.ops[group.members[0]].extra["sources"]) + ext + scalars, group_outputs(plan, group)
