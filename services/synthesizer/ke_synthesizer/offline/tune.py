"""Launch-config neighbours of a candidate: the offline answer to a tuning request.

The search's tuning stage (``ProposalRequest.tune``) asks, for one of its best candidates,
for configurations that keep every structural choice (fusion, impl, layout, attention,
strategy, precision, ...) and change only how the same kernels are launched: their tiles
(``BLOCK_*``, ``GROUP_M``), ``num_warps`` and ``num_stages``. Precision is left out on
purpose: it changes the arithmetic, not the launch, and is searched as structure.

A short sweep should cover the knobs rather than walk one of them, so ``sweep`` lists
single-knob changes with the knobs taking turns (each knob's first alternative, then each
one's second, ...; the kernels' knobs interleaved, so a model's later kernels are not left
to the end), then pairs of knobs of one kernel changed together, again in turns.
The edge is ``Transformation("tune", {"set": "g0.BLOCK_M=128,g0.num_warps=8"})``: a
request's ``tried`` list names what an elite already had, whether from an earlier tuning
request or as a single-knob edge of the structural search, so nothing is proposed twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import product

from kernelevolve.ports.synthesis import Transformation

from .space import Knob

TUNE = "tune"
# Per-kernel knobs that change how a kernel is launched, never what it computes.
LAUNCH_KNOBS = frozenset({"BLOCK_SIZE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_H", "GROUP_M", "num_warps",
                          "num_stages"})

Changes = dict[str, str]


def launch_knobs(space: Sequence[Knob]) -> list[Knob]:
    """The launch knobs among a plan's knobs (per-kernel, never a family-wide move)."""
    return [k for k in space if k.group and not k.sets and k.name in LAUNCH_KNOBS]


def sweep(knobs: Sequence[Knob], genome: Mapping[str, str],
          gains: Mapping[tuple[str, str], float] | None = None) -> Iterator[Changes]:
    """Change sets away from ``genome``: single knobs in turns, then same-kernel pairs in turns.
    ``gains`` (``skills.skill_gains``: (knob name, value) -> measured gain) moves the single
    changes that distilled skills back to the front, by gain; the rest keep their turns."""
    alts = [(k, [c for c in k.choices if c != genome.get(k.key, k.default)]) for k in _kernels_in_turns(knobs)]
    alts = [(k, a) for k, a in alts if a]
    singles = list(_in_turns([[{k.key: v} for v in a] for k, a in alts]))
    if gains:
        names = {k.key: k.name for k, _ in alts}
        singles.sort(key=lambda c: -max(gains.get((names[key], v), 0.0) for key, v in c.items()))
    yield from singles
    pairs = [(a, b) for i, a in enumerate(alts) for b in alts[i + 1:] if a[0].group == b[0].group]
    yield from _in_turns([[{ka.key: va, kb.key: vb} for va, vb in product(a, b)] for (ka, a), (kb, b) in pairs])


def _kernels_in_turns(knobs: Sequence[Knob]) -> list[Knob]:
    """The knobs with the kernels taking turns (g0's first, g1's first, g0's second, ...)."""
    count: dict[str, int] = {}
    ranked = []
    for i, k in enumerate(knobs):
        ranked.append((count.get(k.group, 0), i, k))  # (rank inside its kernel, plan order)
        count[k.group] = count.get(k.group, 0) + 1
    return [k for _, _, k in sorted(ranked, key=lambda r: r[:2])]


def _in_turns(lists: Sequence[Sequence[Changes]]) -> Iterator[Changes]:
    for i in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if i < len(x):
                yield x[i]


def transformation(changes: Changes) -> Transformation:
    return Transformation(TUNE, {"set": ",".join(f"{k}={v}" for k, v in sorted(changes.items()))})


def describe(genome: Mapping[str, str], changes: Changes) -> str:
    """``tune: g0.BLOCK_M 64->128, g0.num_warps 4->8``."""
    return "tune: " + ", ".join(f"{k} {genome.get(k, '?')}->{v}" for k, v in sorted(changes.items()))


def taken(tried: Sequence[Transformation]) -> set[frozenset[tuple[str, str]]]:
    """The change sets ``tried`` already names: tuning edges, and the structural search's
    single launch-knob edges (``Transformation("BLOCK_M", {"group": "g0", "value": "128"})``)."""
    out: set[frozenset[tuple[str, str]]] = set()
    for t in tried:
        if t.name == TUNE:
            pairs = (item.partition("=") for item in t.params.get("set", "").split(",") if item)
            out.add(frozenset((k, v) for k, _, v in pairs))
        elif t.name in LAUNCH_KNOBS and t.params.get("group") and "value" in t.params:
            out.add(frozenset({(f"{t.params['group']}.{t.name}", t.params["value"])}))
    return out
