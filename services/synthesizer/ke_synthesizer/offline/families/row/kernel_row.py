"""Code generation for row groups: pointwise prologues, reductions over a set of dims
and epilogues (including values broadcast back over the row, as in softmax/norms) over
the [M, N] view of the group's full shape (kept dims -> M rows, reduced dims -> N
columns; see row_layout for orientation and addressing).

Strategies (genome ``gK.strategy``; ``auto``, the default, lets the launcher choose
from the run-time sizes, see row_launcher):
- ``single`` (row_body): whole rows in registers, memory read once;
- ``looped`` / ``online`` (row_body): rows walked in BLOCK_N chunks, one pass per
  reduction level plus one for full outputs (sum and centred sum of squares share a
  pass through Welford states); online also fuses max + sum(exp) pairs;
- ``split`` (kernel_row_split): columns of few, long rows spread over many programs,
  deterministic partials combined by the next kernel.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.grid import program_id_lines, wide_id, wide_offsets
from ...emit.launch_helpers import helper_function
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name
from ...plan.plan import Group, Plan
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, narrowed
from .kernel_row_split import split_kernels, split_plan
from .row_body import ROW_HELPERS, looped_body, online_pairs, single_body
from .row_builder import RowBuilder
from .row_launcher import MAX_TILE, LaunchInfo, gen_launcher, tile_limit
from .row_layout import IndexGen

# An explicit "single" keeps a row block's whole reduced extent in registers (BLOCK_N =
# next power of 2). On an H200 every explicit "single" child of a 2^23-element full
# reduction failed to compile (past Triton's 2^20 elements per tensor), and batchnorm2d_module's
# (2^18) passed the judge's 120 s compile limit. Below that, compile time still grows fast
# with the tile: AOT compiles for sm_90 of that batch norm kernel at 4 warps took 0.8 s
# (2^13), 1.8 s (2^14), 6.6 s (2^15), 27 s (2^16), over 400 s (2^18). So it is offered up to
# the chunked tile's 2^14 elements (128 per thread at 4 warps), less for fewer warps (see
# row_launcher.tile_limit). "auto" only takes the single branch for short rows at run time.
SINGLE_MAX_EXTENT = MAX_TILE
_POW2 = helper_function("_pow2")  # the launchers' block rounding


def reduced_extent(b: RowBuilder) -> int:
    """Elements of one row's captured reduced extent."""
    full, dims = b.rinfo.full, b.rinfo.dims
    extent = 1
    for d in dims:
        extent *= int(full[d]) if d < len(full) else 1
    return extent


def single_offered(extent: int, avail: list[str], warps: int) -> bool:
    """Whether "single" may be chosen explicitly at ``warps`` warps: the captured reduced
    extent, rounded up to its block, fits the tile limit, or nothing else can lower the
    group."""
    return _POW2(extent) <= tile_limit(SINGLE_MAX_EXTENT, warps) or avail == ["single"]


def row_strategies(b: RowBuilder, outs: list[tuple[torch.fx.Node, str]]) -> list[str]:
    """Strategies this group can use: single always; looped unless forward and reverse
    scans share a pass; online with a max / sum-of-exp pair; split without scans."""
    ig = IndexGen(b.lay, any(op.cls == "strided" for op in b.operands))
    avail = ["single"]
    try:
        looped_body(b, ig, outs, online=False)
        avail.append("looped")
    except (LoweringError, ValueError):
        return avail
    if online_pairs(b.micros):
        avail.append("online")
    if split_plan(b) is not None:
        avail.append("split")
    return avail


def gen_row(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    b = RowBuilder(plan, group, emitter)
    b.build()
    outs = [(m, b.layouts[m]) for m in group_outputs(plan, group)]
    key = group.key
    avail = row_strategies(b, outs)
    b.helpers.clear()  # only helpers of the emitted kernels
    strategy = genome.get(f"{key}.strategy", "auto")
    dm, dn = (COLUMN_DEFAULTS[k] if b.lay.orient == "col" else RowFamily.knobs[k][0] for k in ("BLOCK_M", "BLOCK_N"))
    info = LaunchInfo(block_m=int(genome.get(f"{key}.BLOCK_M", dm)), block_n=int(genome.get(f"{key}.BLOCK_N", dn)),
                      warps=int(genome.get(f"{key}.num_warps", "4")), programs=genome.get(f"{key}.programs", "grid"))
    if strategy != "auto" and (strategy not in avail or
                               (strategy == "single" and not single_offered(reduced_extent(b), avail, info.warps))):
        strategy = "auto"
    if strategy == "auto":
        info.kernels = [s for s in avail if s != "looped" or "online" not in avail]
    else:
        info.kernels = [strategy]
    ig = IndexGen(b.lay, any(op.cls == "strided" for op in b.operands), wide=wide_offsets(group))
    name = kernel_name(group, "row")
    info.name = name
    sig = kernel_signature(b)
    fused = " -> ".join(group.ops[m].op for m in group.members)
    dims = list(b.rinfo.dims)

    def header(suffix: str, extra: list[str], comment: str) -> list[str]:
        consts = "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr," + (" BLOCK_S: tl.constexpr," if extra else "")
        return ["@triton.jit", f"def {name}_{suffix}(", f"    {', '.join(sig + extra)},", f"    {consts}", "):",
                f"    # {comment}"]

    sources = []
    how = {"single": f"whole rows in registers ({b.lay.orient} tiles), one read of the input",
           "looped": f"rows walked in BLOCK_N chunks ({b.lay.orient} tiles), one pass per reduction level",
           "online": f"rows walked in BLOCK_N chunks ({b.lay.orient} tiles), max and exp-sum in one online pass"}
    for s in info.kernels:
        if s == "split":
            sp = split_plan(b)
            assert sp is not None
            info.split = (sp.top, sp.nslots, len(sp.islots), any(lay == "full" for _, lay in outs))
            sources += split_kernels(b, ig, sp, outs, header, fused)
            continue
        body = single_body(b, ig, outs) if s == "single" else looped_body(b, ig, outs, online=s == "online")
        lines = header(s, [], f"Fuses {fused} over dims {dims}: {how[s]}.")
        if info.programs == "grid":
            lines += program_id_lines(["blk"], wide=ig.wide) + ["    " + ln for ln in ig.row_lines("blk") + body]
        else:
            lines += [f"    # persistent: programs stride over the {ig.nblocks()} row blocks",
                      f"    for blk in range({wide_id('tl.program_id(0)', ig.wide)}, {ig.nblocks()}, "
                      "tl.num_programs(0)):"]
            lines += ["        " + ln for ln in ig.row_lines("blk") + body]
        sources.append("\n".join(lines) + "\n")
    kernel = "\n\n".join(sources)
    for helper in sorted(b.helpers):
        kernel = ROW_HELPERS[helper] + "\n\n" + kernel
    launcher = gen_launcher(b, ig, outs, info)
    return kernel, launcher, f"launch_{name}"


def kernel_signature(b: RowBuilder) -> list[str]:
    sig = [f"in{i}_ptr" for i in range(len(b.operands))] + [f"out{j}_ptr" for j in range(len(group_outs(b)))]
    sig += ["M", "N"] + [f"S{j}" for j in b.lay.size_args()]
    if any(op.cls == "strided" for op in b.operands):
        sig += [f"D{d}" for d in b.lay.dim_args()]
    for i, op in enumerate(b.operands):
        if op.cls == "strided":
            sig += [f"in{i}_s{d}" for d in op.dims]
    return sig + [f"s{i}" for i in range(len(b.scalars))]


def group_outs(b: RowBuilder) -> list[torch.fx.Node]:
    return group_outputs(b.plan, b.group)


def row_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    b = RowBuilder(plan, group, PointwiseEmitter())
    b.build()
    return [op.value for op in b.operands] + list(b.scalars), group_outputs(plan, group)


def is_column_reduction(group: Group) -> bool:
    """The innermost dim is kept: neighbouring rows of the [M, N] view are adjacent in
    memory, so a program should own many rows and walk the reduced dim in short chunks."""
    rinfo = group.info["row"]
    return bool(rinfo.full) and (len(rinfo.full) - 1) not in rinfo.dims


# Row-kernel defaults for column reductions (see is_column_reduction).
COLUMN_DEFAULTS = {"BLOCK_M": "64", "BLOCK_N": "64"}


def row_strategies_of(plan: Plan, group: Group, warps: int = 4) -> list[str]:
    """Strategies a row group offers at ``warps`` warps (availability and the reduced
    extent computed once per plan, see row_strategies)."""
    if "strategies" not in group.info:
        try:
            builder = RowBuilder(plan, group, PointwiseEmitter())
            builder.build()
            outs = [(m, builder.layouts[m]) for m in group_outputs(plan, group)]
            group.info["strategies"] = row_strategies(builder, outs)
            group.info["reduced_extent"] = reduced_extent(builder)
        except (LoweringError, ValueError, KeyError):  # the generator will demote this group anyway
            group.info["strategies"], group.info["reduced_extent"] = ["single"], 1
    avail: list[str] = group.info["strategies"]
    # the knob's choices; the generator keeps "single" for auto's short-row branch
    if single_offered(group.info["reduced_extent"], avail, warps):
        return avail
    return [a for a in avail if a != "single"]


def _warps(genome: dict[str, str], group: Group) -> int:
    """The group's num_warps in the genome (4, the default, when absent)."""
    value = genome.get(f"{group.key}.num_warps", "4")
    return int(value) if value.isdigit() else 4


class RowFamily(KernelFamily):
    """Reductions and scans over a set of dims with their pointwise prologue and epilogue
    (the partitioner's fusion rules grow them)."""

    kind = "row"
    knobs = {
        # auto: the launcher picks single / looped (online) / split from the run-time sizes;
        # single: whole rows in registers; looped: BLOCK_N chunks, one pass per reduction
        # level; online: looped with max + sum(exp(x - max)) fused into one pass (softmax
        # family); split: columns spread over programs, partials combined by a second kernel
        "strategy": ("auto", "single", "looped", "online", "split"),
        "BLOCK_M": ("4", "1", "2", "8", "16", "32", "64"),
        "BLOCK_N": ("1024", "64", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
        "programs": ("grid", "128", "512"),
    }

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        # at the genome's warps: with fewer warps an explicit single child would hold more
        # of the row per thread (a num_warps edge from it gets the run-time choice)
        avail = row_strategies_of(plan, group, _warps(genome, group))
        strategy = genome.get(f"{group.key}.strategy", "auto")
        if strategy not in avail:
            strategy = "auto"  # a strategy not offered: the generator takes the run-time choice
        out: list[tuple[str, tuple[str, ...]]] = []
        for name, choices in self.knobs.items():
            if name == "strategy":
                # the partitioner's allowed list predates chunked scans: availability is computed here
                choices = tuple(avail) if avail == ["single"] else ("auto", *avail)
            else:
                choices = narrowed(group, name, choices)
            if name in COLUMN_DEFAULTS and is_column_reduction(group):
                d = COLUMN_DEFAULTS[name]
                choices = (d,) + tuple(c for c in choices if c != d)
            if name == "BLOCK_N" and (strategy == "single" or avail == ["single"]):
                continue  # the whole row is one block
            if name == "programs" and strategy == "split":
                continue  # the split grid is sized by the row length
            out.append((name, choices))
        return out

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_row(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return row_launch_args(plan, group)
