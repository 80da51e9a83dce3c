"""The transformation space: genome knobs, their choices and defaults.

A genome is a flat ``dict[str, str]``. Global knobs have plain names (``fusion``);
per-kernel knobs are prefixed by their group key (``g0.BLOCK_SIZE``) and declared by the
group's family (``KernelFamily.knobs``, narrowed by ``KernelFamily.group_knobs``). One
edge of the search graph changes exactly one knob: ``Transformation(name=<knob>,
params={"group": <gK or "">, "value": <choice>})``.
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


@dataclass(frozen=True)
class Knob:
    key: str  # genome key
    name: str  # transformation name
    group: str  # "" for global knobs
    choices: tuple[str, ...]

    @property
    def default(self) -> str:
        return self.choices[0]


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
    for key, anchor in sorted(plan.impl_knobs.items()):
        # a conv / matmul as its Triton kernel or as a library call with Triton neighbours;
        # not offered where the candidate would be left without a Triton kernel
        if library_offered(plan, anchor):
            out.append(Knob(key, "impl", anchor, IMPL_CHOICES))
    if len(plan.groups) >= cuda_graph.MIN_KERNELS and (cuda_graph.SEARCHED or cuda_graph.KNOB in genome):
        # whole models: replay the forward's many launches as one CUDA graph (searched
        # while cuda_graph.SEARCHED; a genome that names it always gets it)
        out.append(Knob(cuda_graph.KNOB, cuda_graph.KNOB, "", cuda_graph.CHOICES))
    if plan.spec.rewrites.get("attention"):
        # attention written in plain ops: one flash kernel, or matmul / softmax / matmul kernels
        out.append(Knob("attention", "attention", "", ("flash", "unfused")))
    for g in plan.groups:
        for name, choices in families[g.kind].group_knobs(plan, g, genome):
            out.append(Knob(f"{g.key}.{name}", name, g.key, choices))
    return out


def complete_genome(plan: Plan, genome: dict[str, str],
                    families: Mapping[str, KernelFamily] = BY_KIND) -> dict[str, str]:
    """Fill defaults for every knob of the plan and drop keys of groups that no longer
    exist (a fusion change renumbers groups)."""
    out: dict[str, str] = {}
    for knob in knobs(plan, genome, families):
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
