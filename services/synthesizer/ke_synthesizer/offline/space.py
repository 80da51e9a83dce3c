"""The transformation space: genome knobs, their choices and defaults.

A genome is a flat ``dict[str, str]``. Global knobs have plain names (``fusion``);
per-kernel knobs are prefixed by their group key (``g0.BLOCK_SIZE``). One edge of the
search graph changes exactly one knob: ``Transformation(name=<knob>, params={"group":
<gK or "">, "value": <choice>})``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kernel_conv import LAYOUTS
from .kernel_pointwise import INDEX_CHOICES, VEC_CHOICES, flat_operands
from .kernel_row import RowBuilder, reduced_extent, row_strategies, single_offered
from .library_impl import IMPL_CHOICES, library_offered
from .lower_pointwise import PointwiseEmitter
from .plan import Group, Plan
from .plan_outputs import group_outputs
from .precision import DOT_PRECISIONS

GLOBAL_KNOBS: dict[str, tuple[str, ...]] = {
    # greedy: fuse each lowerable node into its producer's kernel; none: one kernel per op
    "fusion": ("greedy", "none"),
}

# num_warps choices a flash-attention group must not take at (BLOCK_M, BLOCK_N, precision):
# Triton 3.6 miscompiles them. Measured on an H200: of 72 configs of attention_plain
# (BLOCK_M 16-128 x BLOCK_N 16-64 x 2/4/8 warps x tf32x3/ieee, each in its own process),
# only 64 x 16 at 8 warps with tf32x3 faults (illegal memory access), in two searches too.
FAULTY_ATTENTION_WARPS: dict[tuple[str, str, str], tuple[str, ...]] = {("64", "16", "tf32x3"): ("8",)}

# Per-kind knobs of one kernel group and their choices; the first is the default.
GROUP_KNOBS: dict[str, dict[str, tuple[str, ...]]] = {
    "pointwise": {
        "BLOCK_SIZE": ("1024", "256", "512", "2048", "4096"),
        "num_warps": ("4", "1", "2", "8"),
        # grid: one program per tile; N: N persistent programs stride over the tiles
        "programs": ("grid", "128", "512"),
        # auto: the plain kernel; 4: offsets in aligned runs of 4 with the mask bound rounded
        # to a multiple of 4, so Triton can emit 128-bit accesses; the launcher falls back to
        # VEC=1 when numel % 4 != 0 or an input is not 16-byte aligned (flat groups only)
        "VEC": VEC_CHOICES,
        # broadcast operands: output dims and strides as arguments or as constexprs
        # (kernel_pointwise.INDEX_CHOICES; groups with a broadcast operand only)
        "index": INDEX_CHOICES,
    },
    "attention": {
        "BLOCK_M": ("64", "32", "16", "128"),
        "BLOCK_N": ("64", "32", "16", "128"),
        "num_warps": ("4", "8", "2"),
        "num_stages": ("2", "1", "3"),
        "precision": DOT_PRECISIONS,
    },
    "conv": {
        "BLOCK_M": ("64", "32", "128"),
        "BLOCK_N": ("32", "16", "64"),
        "BLOCK_K": ("32", "16", "64"),
        "num_warps": ("4", "2", "8"),
        "num_stages": ("2", "3"),
        "precision": DOT_PRECISIONS,
        # channels_last: the launcher converts input / weight to NHWC / OHWI and the kernel
        # reduces over (kh, kw, cin) with cin innermost; the output stays NCHW (conv2d only)
        "layout": LAYOUTS,
    },
    "pool": {
        "BLOCK_SIZE": ("1024", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
    },
    "row": {
        # auto: the launcher picks single / looped (online) / split from the run-time sizes;
        # single: whole rows in registers; looped: BLOCK_N chunks, one pass per reduction
        # level; online: looped with max + sum(exp(x - max)) fused into one pass (softmax
        # family); split: columns spread over programs, partials combined by a second kernel
        "strategy": ("auto", "single", "looped", "online", "split"),
        "BLOCK_M": ("4", "1", "2", "8", "16", "32", "64"),
        "BLOCK_N": ("1024", "64", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
        "programs": ("grid", "128", "512"),
    },
    "matmul": {
        "BLOCK_M": ("64", "32", "128", "16"),
        "BLOCK_N": ("64", "32", "128", "16"),
        "BLOCK_K": ("32", "16", "64"),
        "GROUP_M": ("8", "1", "4"),
        "num_warps": ("4", "2", "8"),
        "num_stages": ("3", "2", "4"),
        "precision": DOT_PRECISIONS,
        # K split across programs with atomic adds (linear epilogues only)
        "SPLIT_K": ("1", "2", "4"),
    },
}


@dataclass(frozen=True)
class Knob:
    key: str  # genome key
    name: str  # transformation name
    group: str  # "" for global knobs
    choices: tuple[str, ...]

    @property
    def default(self) -> str:
        return self.choices[0]


def is_column_reduction(group: Group) -> bool:
    """The innermost dim is kept: neighbouring rows of the [M, N] view are adjacent in
    memory, so a program should own many rows and walk the reduced dim in short chunks."""
    rinfo = group.info["row"]
    return bool(rinfo.full) and (len(rinfo.full) - 1) not in rinfo.dims


# Row-kernel defaults for column reductions (see is_column_reduction).
COLUMN_DEFAULTS = {"BLOCK_M": "64", "BLOCK_N": "64"}


def row_strategies_of(plan: Plan, group: Group, warps: int = 4) -> list[str]:
    """Strategies a row group offers at ``warps`` warps (availability and the reduced
    extent computed once per plan, see kernel_row)."""
    if "strategies" not in group.info:
        try:
            builder = RowBuilder(plan, group, PointwiseEmitter())
            builder.build()
            outs = [(m, builder.layouts[m]) for m in group_outputs(plan, group)]
            group.info["strategies"] = row_strategies(builder, outs)
            group.info["reduced_extent"] = reduced_extent(builder)
        except (ValueError, KeyError):  # the generator will demote this group anyway
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


def knobs(plan: Plan, genome: dict[str, str] | None = None) -> list[Knob]:
    """Knobs of a plan; knobs that cannot change the generated code under the current
    genome (BLOCK_N of a single-pass row kernel) are left out."""
    genome = genome or {}
    out = [Knob(k, k, "", v) for k, v in GLOBAL_KNOBS.items()]
    for key, anchor in sorted(plan.fusion_knobs.items()):
        # fuse the pointwise ops after a matmul / conv / pool (epilogue) or before a
        # reduction (prologue) into its kernel, or give them a kernel of their own
        out.append(Knob(key, key.split(".")[0], anchor, ("fused", "separate")))
    for key, anchor in sorted(plan.impl_knobs.items()):
        # a conv / matmul as its Triton kernel or as a library call with Triton neighbours;
        # not offered where the candidate would be left without a Triton kernel
        if library_offered(plan, anchor):
            out.append(Knob(key, "impl", anchor, IMPL_CHOICES))
    if plan.spec.rewrites.get("attention"):
        # attention written in plain ops: one flash kernel, or matmul / softmax / matmul kernels
        out.append(Knob("attention", "attention", "", ("flash", "unfused")))
    for g in plan.groups:
        # at the genome's warps: with fewer warps an explicit single child would hold more
        # of the row per thread (a num_warps edge from it gets the run-time choice)
        avail = row_strategies_of(plan, g, _warps(genome, g)) if g.kind == "row" else []
        for name, choices in GROUP_KNOBS.get(g.kind, {}).items():
            if g.kind == "row" and name == "strategy":
                # graph.py's allowed list predates chunked scans: availability is computed here
                choices = tuple(avail) if avail == ["single"] else ("auto", *avail)
            else:
                choices = tuple(_filter(g.kind, name, choices, g.info))
            if g.kind == "row" and name in COLUMN_DEFAULTS and is_column_reduction(g):
                d = COLUMN_DEFAULTS[name]
                choices = (d,) + tuple(c for c in choices if c != d)
            if g.kind == "matmul" and name == "SPLIT_K" and len(g.members) > 1:
                continue  # a non-linear epilogue cannot be applied to partial sums
            if g.kind == "pointwise" and name == "VEC" and not _flat(plan, g):
                continue  # a broadcast operand is read through unravelled strides, not in runs
            if g.kind == "pointwise" and name == "index" and _flat(plan, g):
                continue  # nothing is unravelled when every operand is read flat
            if g.kind == "attention" and name == "num_warps":
                bm, bn, prec = (genome.get(f"{g.key}.{k}", GROUP_KNOBS["attention"][k][0])
                                for k in ("BLOCK_M", "BLOCK_N", "precision"))
                faulty = FAULTY_ATTENTION_WARPS.get((bm, bn, prec), ())
                choices = tuple(c for c in choices if c not in faulty)
            if g.kind == "conv" and name == "layout" and g.ops[g.members[0]].extra.get("nd") != 2:
                continue  # channels_last is a 4-D memory format
            strategy = genome.get(f"{g.key}.strategy", "auto") if g.kind == "row" else ""
            if g.kind == "row" and strategy not in avail:
                strategy = "auto"  # a strategy not offered: the generator takes the run-time choice
            if g.kind == "row" and name == "BLOCK_N" and (strategy == "single" or avail == ["single"]):
                continue  # the whole row is one block
            if g.kind == "row" and name == "programs" and strategy == "split":
                continue  # the split grid is sized by the row length
            out.append(Knob(f"{g.key}.{name}", name, g.key, choices))
    return out


def _flat(plan: Plan, group: Group) -> bool:
    """Whether every operand of a pointwise group is read with the flat index (see
    kernel_pointwise.flat_operands), computed once per plan."""
    if "flat" not in group.info:
        group.info["flat"] = flat_operands(plan, group)
    return bool(group.info["flat"])


def _filter(kind: str, name: str, choices: tuple[str, ...], info: dict) -> list[str]:
    allowed = info.get("allowed", {}).get(name)
    if allowed is None:
        return list(choices)
    return [c for c in choices if c in allowed] or list(choices[:1])


def complete_genome(plan: Plan, genome: dict[str, str]) -> dict[str, str]:
    """Fill defaults for every knob of the plan and drop keys of groups that no longer
    exist (a fusion change renumbers groups)."""
    out: dict[str, str] = {}
    for knob in knobs(plan, genome):
        value = genome.get(knob.key, knob.default)
        out[knob.key] = value if value in knob.choices else knob.default
    return out
