"""Launchers of row groups. Everything that depends only on the input shapes (sizes,
checks of the broadcast pattern decided at code-generation time, output shapes, the
strategy, blocks and grids) is computed once per input signature by ``_plan_<kernel>``
and cached (see launch_helpers / README "Host overhead"); the hot path is a dict
lookup, ``.contiguous()`` (free when already contiguous), output allocation and the
launches.

Run-time choice among the strategies the genome allows (``auto``):

- ``single`` while a whole row (row tiles) or the whole reduced extent for BLOCK_M
  kept columns (col tiles) fits a register tile of SINGLE_TILE elements (scaled down
  for fewer than 4 warps, see tile_limit);
- ``split`` when the row blocks are too few to fill the GPU (fewer than 2 per SM on an
  H100-sized part: FEW_BLOCKS) and each block has enough work to pay for a second
  launch (SPLIT_MIN_WORK elements): every row block's columns are spread over programs,
  SPLIT_PROGRAMS in total;
- ``looped`` / ``online`` otherwise.

The constants are the same on every device (the interpreter has no SM count), so the
source does not depend on where it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.launch_helpers import cached_plan_lines, tuple_source
from ...frontend.fx_meta import dtype_of
from .row_builder import RowBuilder
from .row_layout import IndexGen, operand_meta, own_dim

SINGLE_TILE = 8192  # elements of a whole-row register tile (fp32) at REF_WARPS
MAX_TILE = 16384  # BLOCK_M * BLOCK_N of a chunked tile at REF_WARPS
# A register tile is spread over the program's threads and each thread's share is
# straight-line code; compile time (ptxas above all) grows much faster than that share.
# AOT compiles for sm_90 (triton 3.7.1, on CPU) of std_cols' split kernel, three Welford
# accumulators per tile element, by elements per thread: 32: ~1 s, 64: 0.9 s, 128: 1.8-2.5
# s, 256: 6.6-9 s, 512: 30-36 s, 1024 (64 x 2048 at 4 warps, a seed variant that passed
# the judge's 120 s compile limit on an H200): 570 s. A share takes about the same time at
# 1, 2, 4 or 8 warps, so the limits above hold at REF_WARPS and fewer warps get
# proportionally smaller tiles.
REF_WARPS = 4
SPLIT_PROGRAMS = 528  # programs a split launch aims for (4 per SM on 132 SMs)
FEW_BLOCKS = 264  # fewer row blocks than this (2 per SM) may use the split strategy
# ... when one row block has at least this many elements. Was 65536: a training-mode batch
# norm of 16 channels x 57,344 elements (depthwise_separable_block at its GPU size) then ran
# looped on 16 programs, and the whole block took 84 us on an H100 against 32.6 us with the
# split (2026-11-28 against 2026-11-23, bench/RESULTS.md); past SINGLE_TILE a row already
# spans several BLOCK_N chunks, enough for the split's partials to pay.
SPLIT_MIN_WORK = 16384
GPU_MIN_PROGRAMS = 512  # row tiles: BLOCK_M shrinks on a GPU until about this many programs
KINDS = {"single": 1, "looped": 2, "online": 2, "split": 3}


def tile_limit(elements: int, warps: int) -> int:
    """A tile limit meant at REF_WARPS (``elements``) for a program of ``warps`` warps:
    no thread holds more than it would at REF_WARPS (more warps keep the limit)."""
    return max(1, elements * min(warps, REF_WARPS) // REF_WARPS)


@dataclass
class LaunchInfo:
    block_m: int
    block_n: int
    warps: int
    programs: str
    name: str = ""
    kernels: list[str] = field(default_factory=list)  # strategies with kernels in the source
    split: tuple[int, int, int, bool] = (0, 0, 0, False)  # passes, fp32 slots, index slots, full outputs


def _shape_source(b: RowBuilder) -> int | None:
    """An operand that has the group's full shape (decided on the captured shapes)."""
    for i, op in enumerate(b.operands):
        if op.layout == "full" and op.rank == b.lay.rank and op.cls in ("full", "strided"):
            if operand_meta(b.plan.spec, op.value)[0] == b.rinfo.full:
                return i
    return None


def _checks(b: RowBuilder, src: int | None) -> list[str]:
    """Plan-time checks that operands still have the broadcast pattern the kernel was
    generated for (an operand that does not fit raises, never computes something else)."""
    lay, rank = b.lay, b.lay.rank
    d = [f"d{k}" for k in range(rank)]
    keep = tuple_source([d[k] if k in lay.kept else "1" for k in range(rank)])
    flat = tuple_source([d[k] for k in lay.kept])
    col = tuple_source([d[k] if k in lay.dims else "1" for k in range(rank)])
    full = tuple_source(d)
    lines = []
    for i, op in enumerate(b.operands):
        r = len(lay.kept) if op.layout == "rowflat" else rank
        padded = f"(1,) * ({r} - t{i}.dim()) + tuple(t{i}.shape)"
        if op.cls == "one":
            bad = f"t{i}.numel() != 1"
        elif op.cls == "full":
            if i == src:
                continue
            bad = f"tuple(t{i}.shape) != {full}"
        elif op.cls == "row":
            bad = f"{padded} != {flat if op.layout == 'rowflat' else keep}"
        elif op.cls == "col":
            bad = f"{padded} != {col}"
        else:
            target = [d[k] for k in lay.kept] if op.layout == "rowflat" else d
            bdims = [j for j in range(r) if (lay.kept[j] if op.layout == "rowflat" else j) not in op.dims]
            conds = [f"t{i}.dim() > {r}"] + [f"p{i}[{j}] not in (1, {target[j]})" for j in range(r)]
            conds += [f"p{i}[{j}] != 1" for j in bdims]
            lines.append(f"p{i} = {padded}")
            bad = " or ".join(conds)
        lines += [f"if {bad}:", f"    raise RuntimeError('{b.group.key}: operand {i} does not broadcast as expected')"]
    return lines


def gen_launcher(b: RowBuilder, ig: IndexGen, outs: list[tuple[torch.fx.Node, str]], info: LaunchInfo) -> str:
    lay, rank, name = b.lay, b.lay.rank, info.name
    tensors = [f"t{i}" for i in range(len(b.operands))]
    scalars = [f"s{i}" for i in range(len(b.scalars))]
    src = _shape_source(b)
    dev = f"t{src if src is not None else 0}"
    d = [f"d{k}" for k in range(rank)]

    def prod(ds: tuple[int, ...] | list[int]) -> str:
        return " * ".join(f"d{k}" for k in ds) or "1"

    # ---- plan: once per input signature ----
    pl = [f"def _plan_{name}({', '.join(tensors)}):"]
    if src is not None:
        shape = f"t{src}.shape"
    else:
        full_ops = [f"t{i}.shape" for i, op in enumerate(b.operands) if op.layout == "full"]
        if not full_ops:
            raise LoweringError("row group without a full-size operand")
        shape = f"_broadcast_shape({', '.join(full_ops)})"
    if rank:
        pl.append(f"    {', '.join(d)}{',' if rank == 1 else ''} = {shape}")
    pl += ["    " + line for line in _checks(b, src)]
    pl += [f"    m = {prod(lay.kept)}", f"    n = {prod(lay.dims)}"]
    sizes = ["m", "n"] + [prod(lay.runs[j][1]) for j in lay.size_args()]
    if any(op.cls == "strided" for op in b.operands):
        sizes += [f"d{k}" for k in lay.dim_args()]
    for i, op in enumerate(b.operands):
        if op.cls == "strided":  # 0 where the operand broadcasts at run time
            sizes += [f"(0 if p{i}[{j}] == 1 else t{i}.stride({own_dim(op, lay, k)}))"
                      for k in op.dims for j in [lay.kept.index(k) if op.layout == "rowflat" else k]]
    shapes = []
    for _m, layout in outs:
        if layout == "full":
            shapes.append(tuple_source(d))
        elif layout == "total":
            shapes.append("()")
        else:
            shapes.append(tuple_source([d[k] if k in lay.kept else "1" for k in range(rank)]) if layout == "row"
                          else tuple_source([d[k] for k in lay.kept]))
    pl += [f"    sizes = {tuple_source(sizes)}", f"    shapes = {tuple_source(shapes)}",
           "    kind, grid, fgrid, bm, bn, bs, s, chunk, psize, isize = 0, None, None, 1, 1, 1, 1, 1, 0, 0",
           "    if m > 0:"]
    if lay.orient == "col":
        ki = ig.inner_kept()
        pl.append(f"        ki = {prod(lay.runs[ki][1]) if ki is not None else 'm'}  # contiguous kept columns")
    pl += ["        " + line for line in _choice(ig, info, dev)]
    pl.append("    return kind, grid, fgrid, bm, bn, bs, s, chunk, psize, isize, sizes, shapes")

    # ---- launcher: the hot path ----
    cache = f"_plans_{name}"
    key = []
    for i, op in enumerate(b.operands):
        key += [f"t{i}.shape"] + ([f"t{i}.stride()"] if op.cls == "strided" else [])
    key.append(f"{dev}.is_cuda")
    ll = [f"def launch_{name}({', '.join(tensors + scalars)}):"]
    ll += cached_plan_lines(cache, tuple_source(key), f"_plan_{name}({', '.join(tensors)})",
                            "kind, grid, fgrid, bm, bn, bs, s, chunk, psize, isize, sizes, shapes")
    for i, op in enumerate(b.operands):
        if op.guard:
            ll.append(f"    t{i} = t{i}.contiguous()  # addressed through its contiguous layout")
    dev_op = b.operands[src if src is not None else 0].value
    dev_dt = dtype_of(dev_op) if isinstance(dev_op, torch.fx.Node) else torch.float32

    def of(dt: torch.dtype) -> str:  # new_empty / empty_like keep the device (and dtype unless given)
        return "" if dt == dev_dt else f", dtype={dt}"

    for j, (m, layout) in enumerate(outs):
        dt = dtype_of(m) or torch.float32
        if layout == "total":  # accumulated by atomic adds
            ll.append(f"    out{j} = {dev}.new_zeros(shapes[{j}]{of(dt)})")
        elif layout == "full" and src is not None and b.operands[src].cls == "full":
            ll.append(f"    out{j} = torch.empty_like({dev}{of(dt)})")
        else:
            ll.append(f"    out{j} = {dev}.new_empty(shapes[{j}]{of(dt)})")
    args = ", ".join(tensors + [f"out{j}" for j in range(len(outs))]) + ", *sizes" + \
        "".join(f", {s}" for s in scalars)
    consts = f"BLOCK_M=bm, BLOCK_N=bn, num_warps={info.warps}"
    branches = []
    for k in info.kernels:
        if k == "split":
            passes, _, islots, _ = info.split
            extra = ", part" + (", pidx" if islots else "") + ", s, chunk"
            body = [f"part = {dev}.new_empty((psize,){of(torch.float32)})"]
            if islots:
                body.append(f"pidx = {dev}.new_empty((isize,){of(torch.int32)})")
            body += [f"{name}_part{p}[grid]({args}{extra}, BLOCK_S=bs, {consts})" for p in range(1, passes + 1)]
            body.append(f"{name}_finish[fgrid]({args}{extra}, BLOCK_S=bs, {consts})")
        else:
            body = [f"{name}_{k}[grid]({args}, {consts})"]
        branches.append((KINDS[k], body))
    for n, (kind, body) in enumerate(branches):
        cond = "kind" if len(branches) == 1 else f"kind == {kind}"
        ll.append(f"    {'if' if n == 0 else 'elif'} {cond}:")
        ll += ["        " + line for line in body]
    ll.append(f"    return {', '.join(f'out{j}' for j in range(len(outs)))}")
    return "\n".join([f"{cache} = {{}}  # input signature -> launch plan", "", ""] + pl + ["", ""] + ll) + "\n"


def _blocks(ig: IndexGen, info: LaunchInfo, dev: str, single: bool) -> list[str]:
    """bm / bn and the number of row blocks (nb) for one strategy."""
    bmk, bnk = info.block_m, info.block_n
    single_tile, max_tile = tile_limit(SINGLE_TILE, info.warps), tile_limit(MAX_TILE, info.warps)
    if ig.lay.orient == "row":
        if single:
            lines = ["bn = _pow2(n)", f"bm = max(1, min({bmk}, {single_tile} // bn, _pow2(m)))"]
        else:
            lines = [f"bn = min({bnk}, _pow2(n))", f"bm = max(1, min({bmk}, {max_tile} // bn, _pow2(m)))"]
        return lines + [f"if {dev}.is_cuda:  # fewer rows per program so every SM gets work",
                        f"    bm = max(1, min(bm, _pow2((m + {GPU_MIN_PROGRAMS - 1}) // {GPU_MIN_PROGRAMS})))",
                        "nb = (m + bm - 1) // bm"]
    if single:
        lines = ["bn = _pow2(n)", f"bm = max(1, min({bmk}, _pow2(ki), {max_tile} // bn))"]
    else:  # narrow kept blocks walk the reduced dim in longer chunks; BLOCK_N is capped
        # too: the std_cols seed variant BLOCK_N=2048 (64 x 2048) took 570 s to compile
        lines = [f"bm = max(1, min({bmk}, _pow2(ki)))",
                 f"bn = max(1, min(max({bnk}, 4096 // bm), {max_tile} // bm, _pow2(n)))"]
    return lines + ["nb = (m // ki) * ((ki + bm - 1) // bm)"]


def _plain(info: LaunchInfo, kernel: str) -> list[str]:
    grid = "(nb,)" if info.programs == "grid" else f"(min(nb, {int(info.programs)}),)  # persistent programs"
    return [f"kind, grid = {KINDS[kernel]}, {grid}"]


def _split(info: LaunchInfo, forced: bool) -> list[str]:
    """S column ranges (whole chunks) per row block, partial buffers and grids."""
    _, nslots, islots, has_full = info.split
    lines = ["chunk = ((n + s - 1) // s + bn - 1) // bn * bn  # columns per program",
             "s = (n + chunk - 1) // chunk",
             f"kind, grid, fgrid = 3, (nb, s), {'(nb, s)' if has_full else '(nb,)'}",
             f"bs, psize, isize = max(1, min(_pow2(s), 4096 // bm)), {nslots} * s * m, "
             + (f"{islots} * s * m" if islots else "0")]
    splits = f"s = max(1, min(({SPLIT_PROGRAMS} + nb - 1) // nb, (n + bn - 1) // bn))"
    return [splits] + (lines if forced else ["if s > 1:  # split the columns too"] + ["    " + ln for ln in lines])


def _choice(ig: IndexGen, info: LaunchInfo, dev: str) -> list[str]:
    ks = info.kernels
    chunked = next((k for k in ("online", "looped") if k in ks), None)
    if ks == ["single"]:
        return _blocks(ig, info, dev, True) + _plain(info, "single")
    if ks == ["split"]:
        return _blocks(ig, info, dev, False) + _split(info, True)
    if chunked is not None and len(ks) == 1:
        return _blocks(ig, info, dev, False) + _plain(info, chunked)
    # auto: single while it fits, split for few row blocks with enough work, else chunked
    assert chunked is not None and "single" in ks
    single_tile = tile_limit(SINGLE_TILE, info.warps)
    if ig.lay.orient == "row":
        fits = f"n <= {single_tile}"
        work = "n * min(bm, m)"
    else:
        fits = f"_pow2(n) * min({info.block_m}, _pow2(ki)) <= {single_tile}"
        work = "n * min(bm, ki)"
    lines = [f"if {fits}:  # whole rows in registers"]
    lines += ["    " + ln for ln in _blocks(ig, info, dev, True) + _plain(info, "single")]
    lines += ["else:"]
    rest = _blocks(ig, info, dev, False) + _plain(info, chunked)
    if "split" in ks:
        rest += [f"if nb < {FEW_BLOCKS} and {work} >= {SPLIT_MIN_WORK}:  # too few row blocks to fill the GPU"]
        rest += ["    " + ln for ln in _split(info, False)]
    return lines + ["    " + ln for ln in rest]
