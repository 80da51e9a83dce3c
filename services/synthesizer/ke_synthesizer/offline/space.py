"""The transformation space: genome knobs, their choices and defaults.

A genome is a flat ``dict[str, str]``. Global knobs have plain names (``fusion``);
per-kernel knobs are prefixed by their group key (``g0.BLOCK_SIZE``) and declared by the
group's family (``KernelFamily.knobs``, narrowed by ``KernelFamily.group_knobs``). An
edge of the search graph changes one knob: ``Transformation(name=<knob>,
params={"group": <gK or "">, "value": <choice>})``; a *family-wide move* (``impl_conv``,
``impl_matmul``, ``layout``: ``Knob.sets``) sets the same knob of every node of one
family in that one edge.

Family-wide moves exist because one knob per node made a whole model unreachable: a
16-convolution network needed 16 single-knob steps to move its convolutions to the
library, and a budget-12 search evaluated 8 candidates, all with every convolution in
Triton (0.11x torch.compile on an H100). Their genome value is derived, never read by the
lowering: ``mixed`` when the members differ, else the members' common value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .emit import cuda_graph
from .families import BY_KIND
from .families.attention.kernel_attention import FAULTY_ATTENTION_WARPS  # noqa: F401 - bench/attention_configs.py clears it
from .families.family import KernelFamily
from .families.library_impl import IMPL_CHOICES, library_offered
from .plan.plan import Plan

GLOBAL_KNOBS: dict[str, tuple[str, ...]] = {
    # greedy: fuse each lowerable node into its producer's kernel; none: one kernel per op
    "fusion": ("greedy", "none"),
}

# Per-kind knobs of one kernel group and their choices (the first is the default), as the
# families declare them.
GROUP_KNOBS: Mapping[str, Mapping[str, tuple[str, ...]]] = {kind: f.knobs for kind, f in BY_KIND.items()}


# the derived value of a family-wide move whose members differ (a state, never an edge)
MIXED = "mixed"
# family-wide ``impl`` moves: genome key -> the family of heavy nodes it sets
IMPL_MOVES = {"impl_conv": "conv", "impl_matmul": "matmul"}
# the family-wide layout move: one memory layout for every convolution of the model
LAYOUT_MOVE = "layout"


@dataclass(frozen=True)
class Knob:
    key: str  # genome key
    name: str  # transformation name
    group: str  # "" for global knobs
    choices: tuple[str, ...]
    # a family-wide move: the genome keys it sets, all to the chosen value, in one edge
    sets: tuple[str, ...] = ()

    @property
    def default(self) -> str:
        return self.choices[0]

    @property
    def targets(self) -> tuple[str, ...]:
        """The values an edge may choose (a move's ``mixed`` is only ever a state)."""
        return tuple(c for c in self.choices if c != MIXED) if self.sets else self.choices

    def derived(self, genome: Mapping[str, str]) -> str:
        """A move's value in ``genome``: its members' common value, else ``mixed``."""
        values = {genome.get(k) for k in self.sets}
        return str(values.pop()) if len(values) == 1 and None not in values else MIXED


def apply_edge(knobs_: list[Knob], genome: Mapping[str, str], knob: Knob, value: str) -> dict[str, str]:
    """``genome`` with ``knob`` set to ``value`` (a move sets every member too), and every
    move's derived value brought up to date, so that a later per-node edge and the move
    never disagree."""
    out = dict(genome)
    out[knob.key] = value
    for key in knob.sets:
        out[key] = value
    for move in knobs_:
        if move.sets:
            out[move.key] = move.derived(out)
    return out


def _moves(plan: Plan, knobs_: list[Knob]) -> list[Knob]:
    """The family-wide moves of a plan: one per family with at least two members."""
    out: list[Knob] = []
    for key, family in IMPL_MOVES.items():
        # only nodes whose own impl knob is offered: a conv with no Triton neighbour stays Triton,
        # so the all-library move always leaves Triton epilogues doing part of the arithmetic
        members = tuple(k.key for k in knobs_ if k.name == "impl" and plan.impl_families.get(k.key) == family)
        if len(members) >= 2:
            out.append(Knob(key, key, "", (MIXED,) + IMPL_CHOICES, members))
    layouts = [k for k in knobs_ if k.name == LAYOUT_MOVE and k.group]
    if len(layouts) >= 2 and len({k.choices for k in layouts}) == 1:
        # one layout decision for the whole CNN instead of one per convolution
        out.append(Knob(LAYOUT_MOVE, LAYOUT_MOVE, "", (MIXED,) + layouts[0].choices, tuple(k.key for k in layouts)))
    return out


def knobs(plan: Plan, genome: dict[str, str] | None = None,
          families: Mapping[str, KernelFamily] = BY_KIND) -> list[Knob]:
    """Knobs of a plan (its groups' families by kind in ``families``); knobs that cannot
    change the generated code under the current genome (BLOCK_N of a single-pass row
    kernel) are left out."""
    genome = genome or {}
    out = [Knob(k, k, "", v) for k, v in GLOBAL_KNOBS.items()]
    for key, anchor in sorted(plan.fusion_knobs.items()):
        # fuse the pointwise ops after a matmul / conv / pool (epilogue) or before a
        # reduction (prologue) into its kernel, or give them a kernel of their own; a
        # scalar total of per-row values: atomic adds in the row kernel, or a kernel of its own
        choices: tuple[str, ...] = ("atomic", "separate") if key.startswith("total.") else ("fused", "separate")
        out.append(Knob(key, key.split(".")[0], anchor, choices))
    offered = library_offered(plan) if plan.impl_knobs else set()
    for key, anchor in sorted(plan.impl_knobs.items()):
        # a conv / matmul as its Triton kernel or as a library call with Triton neighbours;
        # not offered where the candidate would be left without a Triton kernel
        if anchor in offered:
            default = plan.impl_defaults.get(key, IMPL_CHOICES[0])  # the seed policy's (impl_policy.py)
            out.append(Knob(key, "impl", anchor, (default,) + tuple(c for c in IMPL_CHOICES if c != default)))
    launches = sum(families[g.kind].launches(g) for g in plan.groups)
    if launches >= cuda_graph.MIN_KERNELS and (cuda_graph.SEARCHED or cuda_graph.KNOB in genome):
        # whole models: replay the forward's many launches as one CUDA graph (searched
        # while cuda_graph.SEARCHED; a genome that names it always gets it)
        out.append(Knob(cuda_graph.KNOB, cuda_graph.KNOB, "", cuda_graph.CHOICES))
    if plan.spec.rewrites.get("attention"):
        # attention written in plain ops: one flash kernel, or matmul / softmax / matmul kernels
        out.append(Knob("attention", "attention", "", ("flash", "unfused")))
    for g in plan.groups:
        for name, choices in families[g.kind].group_knobs(plan, g, genome):
            out.append(Knob(f"{g.key}.{name}", name, g.key, choices))
    return out + _moves(plan, out)


def complete_genome(plan: Plan, genome: dict[str, str],
                    families: Mapping[str, KernelFamily] = BY_KIND) -> dict[str, str]:
    """Fill defaults for every knob of the plan and drop keys of groups that no longer
    exist (a fusion change renumbers groups)."""
    out: dict[str, str] = {}
    for knob in knobs(plan, genome, families):  # a move comes after its members
        if knob.sets:
            out[knob.key] = knob.derived(out)
            continue
        value = genome.get(knob.key, knob.default)
        out[knob.key] = value if value in knob.choices else knob.default
    return out


def skill_weighted(edges: list[tuple[Knob, str]], gains: Mapping[tuple[str, str], float]) -> list[tuple[Knob, str]]:
    """``edges`` with those that distilled skills back first, by their gain (stable: the
    rest keep their order). ``gains`` maps (transformation name, value) to the measured
    lower gain bound of the best skill for it in this context (``ke_synthesizer.offline.
    skills``); an empty map changes nothing."""
    if not gains:
        return edges
    return sorted(edges, key=lambda e: -gains.get((e[0].name, e[1]), 0.0))
